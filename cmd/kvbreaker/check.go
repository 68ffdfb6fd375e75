package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/internal/conformcheck"

	"github.com/kvbreaker/kvbreaker/internal/output"
)

var checkLong = `Runs kvbreaker's conformance checks against a live store, under a fresh
throwaway key prefix (your --prefix plus "check-<random>/"), and deletes every
key it wrote when it ends, when --timeout passes, or on Ctrl-C (then it exits
130), purging as well what a delete or an expiry leaves behind in a store
that keeps it (tombstones, expired items and rows), so nothing stays.
Your fleet's own keys are never read or written.

It prints, for each promise the store declares (its Traits), what was
measured: compare-and-swap (atomic or last-writer-wins), expiry early and
late against the declared model, read staleness, round-trip p50/p99 per
operation, and the TTLMargin a fleet over this deployment needs for
--clock-skew. It also reads the store's clock, where the store shows one
(others: "not measurable"), and reports how far this machine's clock is
from it, next to --clock-skew. The exit code is 1
when the store breaks a promise it declares (each broken promise is named) or
this machine's clock is proven further from the store's than --clock-skew,
2 for bad flags, 0 otherwise.

Expiry is measured in real time: the check writes entries with a short TTL
and waits for them to vanish (a few seconds on most stores; over a minute
where the minimum TTL is 60 s, as Workers KV's). --quick skips those waits. Progress
goes to stderr.

Reading the table:
  DECLARED   what the store's Traits promise; MEASURED what this run saw
  expiry     early: how far before its TTL (minus the declared granularity)
             an entry vanished; late: how long after its TTL it was still there
  TTLMargin  the Settings.TTLMargin your Breakers need over this deployment
             for --clock-skew: the declared model's, or more if expiry was
             measured earlier than declared
  clock      the store's clock minus this machine's, ± what the round trips
             and the clock's resolution leave unknown (3 samples); it fails
             the check only when the whole interval lies beyond --clock-skew

` + backendFlagsHelp

// checkFlags are check's own flags.
type checkFlags struct {
	bf         backendFlags
	format     string
	quick      bool
	timeout    time.Duration
	expiryTTL  time.Duration
	iterations int
	quiet      bool
}

func newCheckCmd(stopSignals func()) *cobra.Command {
	var f checkFlags
	cmd := &cobra.Command{
		Use:     "check --backend NAME [connection flags] [flags]",
		Short:   "run the conformance checks against a live store and print what it keeps",
		Long:    checkLong,
		Example: examples("check", "", "--quick", "--format json"),
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCheck(cmd.Context(), stopSignals, &f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	f.bf.register(fs)
	fs.StringVar(&f.format, "format", "table", "output format: table or json")
	fs.BoolVar(&f.quick, "quick", false, "skip the cases that wait in real time for entries to expire or reads to catch up")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Minute, "give up (exit 1) after this long, cleaning up first")
	fs.DurationVar(&f.expiryTTL, "expiry-ttl", 0, "TTL the expiry cases write with (default max(store's minimum TTL, 2s))")
	fs.IntVar(&f.iterations, "iterations", 40, "read-then-swap rounds per goroutine in the linearizability case")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress on stderr")
	completeFlags(cmd)
	return cmd
}

func (f *checkFlags) validate() error {
	if err := f.bf.applyEnv(); err != nil {
		return err
	}
	switch {
	case checkFormat(f.format) != nil:
		return checkFormat(f.format)
	case f.timeout <= 0:
		return usagef("--timeout must be positive")
	case f.expiryTTL < 0:
		return usagef("--expiry-ttl is %v: want zero (default) or more", f.expiryTTL)
	case f.iterations <= 0:
		return usagef("--iterations must be positive")
	}
	return f.bf.validate()
}

// interruptCleanup bounds the deletion of what check wrote after Ctrl-C:
// the user asked to stop, so a few seconds, not cleanupTimeout.
const interruptCleanup = 5 * time.Second

// runCheck is the check subcommand. sigCtx ends on Ctrl-C.
func runCheck(sigCtx context.Context, stopSignals func(), f *checkFlags, stdout, stderr io.Writer) error {
	if err := f.validate(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(sigCtx, f.timeout)
	defer cancel()
	c, err := f.bf.open(ctx, f.timeout)
	if err != nil {
		if sigCtx.Err() != nil {
			return &exitError{exitInterrupted}
		}
		return err
	}
	defer c.close()

	progress := io.Discard
	if !f.quiet {
		progress = stderr
	}
	prefix := f.bf.prefix + "check-" + randomHex(6) + "/"
	h := &checkHarness{c: c, prefix: prefix}
	opts := []func(*conformcheck.Options){
		// Zero means "default" to the suite; the command means zero.
		conformance.WithClockSkew(max(f.bf.clockSkew, time.Nanosecond)),
		conformance.WithSkipSlow(f.quick),
		conformance.WithExpiryTTL(f.expiryTTL),
		conformance.WithIterations(f.iterations),
	}
	fmt.Fprintf(progress, "kvbreaker check: %s, under prefix %q (removed at the end)\n", c.describe, prefix)
	start := time.Now()
	clk := measureClock(ctx, c, f.bf.clockSkew)
	stop := h.showProgress(progress, start)
	// Measure, not conformance.Check: a live store cannot show what only
	// a harness capability verifies (its lifetimes, lost answers), so
	// check lists those promises NOT VERIFIED, with the waiver a harness
	// would need, and does not fail for them.
	rep, merr := conformcheck.Measure(ctx, h.harness(), opts...)
	stop()
	elapsed := time.Since(start)
	interrupted := sigCtx.Err() != nil
	if interrupted {
		// A second Ctrl-C now kills the process.
		stopSignals()
		fmt.Fprintf(stderr, "kvbreaker check: interrupted; deleting what the check wrote under %q (at most %v)\n", prefix, interruptCleanup)
	}
	bound := cleanupTimeout
	if interrupted {
		bound = interruptCleanup
	}
	cleaned, purged, left := h.cleanup(bound)
	if left > 0 {
		fmt.Fprintf(stderr, "kvbreaker check: could not remove %d of the keys the check wrote under %q: %s\n", left, prefix, leftBehind(c))
	} else {
		fmt.Fprintf(progress, "kvbreaker check: removed every key the check wrote under %q (%d records deleted, %d tombstones and expired entries purged)\n", prefix, cleaned, purged)
	}
	if interrupted {
		return &exitError{exitInterrupted}
	}
	if rep == nil {
		return merr
	}
	timedOut := ctx.Err() != nil
	out := newCheckOutput(rep, f, c, prefix, elapsed, timedOut, cleaned, purged, left)
	out.setClock(clk)
	if f.format == "json" {
		if err := output.JSON(stdout, out); err != nil {
			return err
		}
	} else {
		out.writeTable(stdout)
		if w := c.backend.wipes; w != "" {
			fmt.Fprintf(stdout, "mirror, changes behind the adapters' back: %s\n", w)
		}
	}
	switch {
	case timedOut:
		fmt.Fprintf(stderr, "kvbreaker check: gave up after --timeout %v; the report above is partial\n", f.timeout)
		return &exitError{exitFail}
	case !out.OK:
		if len(out.Broken) > 0 {
			fmt.Fprintf(stderr, "kvbreaker check: the store breaks %d promise(s) it declares\n", len(out.Broken))
		}
		if clk.Result == clockExceeds {
			fmt.Fprintf(stderr, "kvbreaker check: %s\n", clk.line())
		}
		return &exitError{exitFail}
	}
	return nil
}

// leftBehind says how long what check could not remove stays.
func leftBehind(c *conn) string {
	if c.backend.leftBehind != "" {
		return c.backend.leftBehind
	}
	return "they expire by themselves within 10 minutes"
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
