package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
)

const checkHelp = `Usage: kvbreaker check --backend NAME [connection flags] [flags]

Runs kvbreaker's conformance checks against a live store, under a fresh
throwaway key prefix (your --prefix plus "check-<random>"), and deletes every
key it wrote when it ends. Your fleet's own keys are never read or written.

It prints, for each promise the store declares (its Traits), what was
measured: compare-and-swap (atomic or last-writer-wins), expiry early and
late against the declared model, read staleness, round-trip p50/p99 per
operation, and the TTLMargin a fleet over this deployment needs for
--clock-skew. The exit code is 1 when the store breaks a promise it declares
(each broken promise is named), 2 for bad flags, 0 otherwise.

Expiry is measured in real time: the check writes entries with a short TTL
and waits for them to vanish (a few seconds on etcd and DynamoDB; Workers KV's
60 s minimum TTL makes it over a minute). --quick skips those waits. Progress
goes to stderr.

Examples:
  kvbreaker check --backend etcd --etcd-endpoints http://127.0.0.1:2379
  kvbreaker check --backend etcd --etcd-endpoints https://etcd-1:2379 \
      --etcd-cacert ca.pem --etcd-cert client.pem --etcd-key client-key.pem
  AWS_REGION=eu-west-1 kvbreaker check --backend dynamodb --dynamodb-table kvbreaker
  kvbreaker check --backend dynamodb --dynamodb-table kvbreaker \
      --dynamodb-endpoint http://localhost:8000 --quick
  CLOUDFLARE_API_TOKEN=... kvbreaker check --backend cloudflarekv \
      --cf-account 0123abcd --cf-namespace 4567ef89 --format json
  kvbreaker check --backend memory

`

const checkFooter = `
Reading the table:
  DECLARED   what the store's Traits promise; MEASURED what this run saw
  expiry     early: how far before its TTL (minus the declared granularity)
             an entry vanished; late: how long after its TTL it was still there
  TTLMargin  the Settings.TTLMargin your Breakers need over this deployment
             for --clock-skew: the declared model's, or more if expiry was
             measured earlier than declared
`

// runCheck is the check subcommand.
func runCheck(args []string, stdout, stderr io.Writer) int {
	var bf backendFlags
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), checkHelp)
		fmt.Fprint(fs.Output(), backendFlagsHelp)
		fmt.Fprint(fs.Output(), "\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), checkFooter)
	}
	bf.register(fs)
	format := fs.String("format", "table", "output format: table or json")
	quick := fs.Bool("quick", false, "skip the cases that wait in real time for entries to expire or reads to catch up")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up (exit 1) after this long, cleaning up first")
	expiryTTL := fs.Duration("expiry-ttl", 0, "TTL the expiry cases write with (default max(store's minimum TTL, 2s))")
	iterations := fs.Int("iterations", 40, "read-then-swap rounds per goroutine in the linearizability case")
	quiet := fs.Bool("quiet", false, "no progress on stderr")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "kvbreaker check: "+format+"\nRun \"kvbreaker check --help\" for the flags.\n", a...)
		return exitUsage
	}
	switch {
	case fs.NArg() > 0:
		return bad("unexpected argument %q: check takes only flags", fs.Arg(0))
	case *format != "table" && *format != "json":
		return bad("--format is %q: want table or json", *format)
	case *timeout <= 0:
		return bad("--timeout must be positive")
	case *expiryTTL < 0:
		return bad("--expiry-ttl is %v: want zero (default) or more", *expiryTTL)
	case *iterations <= 0:
		return bad("--iterations must be positive")
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	// A dead endpoint fails within connectTimeout, not --timeout.
	octx, ocancel := context.WithTimeout(ctx, connectTimeout)
	c, err := bf.open(octx)
	ocancel()
	if err != nil {
		return openFailed("check", err, stderr)
	}
	defer c.close()

	progress := io.Discard
	if !*quiet {
		progress = stderr
	}
	prefix := bf.basePrefix(c) + "check-" + randomHex(6) + c.sep
	h := &checkHarness{c: c, prefix: prefix}
	opts := conformance.Options{
		ClockSkew:  bf.clockSkew,
		SkipSlow:   *quick,
		ExpiryTTL:  *expiryTTL,
		Iterations: *iterations,
	}
	if bf.clockSkew == 0 {
		// Options read zero as "default"; the command means zero.
		opts.ClockSkew = time.Nanosecond
	}
	fmt.Fprintf(progress, "kvbreaker check: %s, under prefix %q (removed at the end)\n", c.describe, prefix)
	start := time.Now()
	stop := h.showProgress(progress, start)
	rep, merr := conformance.Measure(ctx, h.harness(), opts)
	stop()
	elapsed := time.Since(start)

	cleaned, left := h.cleanup()
	if left > 0 {
		fmt.Fprintf(stderr, "kvbreaker check: could not delete %d of the keys the check wrote under %q (they expire by themselves within 10 minutes)\n", left, prefix)
	} else {
		fmt.Fprintf(progress, "kvbreaker check: removed %d keys the check wrote\n", cleaned)
	}
	if rep == nil {
		fmt.Fprintf(stderr, "kvbreaker check: %v\n", merr)
		return exitFail
	}
	timedOut := ctx.Err() != nil
	out := newCheckOutput(rep, &bf, c, prefix, elapsed, *quick, timedOut, cleaned, left)
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(stderr, "kvbreaker check: %v\n", err)
			return exitFail
		}
	} else {
		out.writeTable(stdout)
	}
	switch {
	case timedOut:
		fmt.Fprintf(stderr, "kvbreaker check: gave up after --timeout %v; the report above is partial\n", *timeout)
		return exitFail
	case !out.OK:
		fmt.Fprintf(stderr, "kvbreaker check: the store breaks %d promise(s) it declares\n", len(out.Broken))
		return exitFail
	}
	return exitOK
}

// connectTimeout bounds connecting to the backend.
const connectTimeout = 30 * time.Second

// openFailed reports a failure to open the backend: a usage error (exit
// 2) or a connection failure (exit 1).
func openFailed(cmd string, err error, stderr io.Writer) int {
	if ue, ok := errors.AsType[*usageError](err); ok {
		fmt.Fprintf(stderr, "kvbreaker %s: %s\nRun \"kvbreaker %s --help\" for the flags.\n", cmd, ue.msg, cmd)
		return exitUsage
	}
	fmt.Fprintf(stderr, "kvbreaker %s: %v\n", cmd, err)
	return exitFail
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// checkHarness is the conformance harness over a live deployment: each
// MakeStore is a store under a new sub-prefix of prefix, and every key
// written through it is remembered for cleanup.
type checkHarness struct {
	c      *conn
	prefix string
	n      atomic.Int64 // stores made
	calls  atomic.Int64 // store calls made

	mu     sync.Mutex
	stores []*trackedStore
}

// advancingHarness is a checkHarness over a backend whose clock the
// command controls (test servers): a conformance.TimeAdvancer.
type advancingHarness struct{ *checkHarness }

func (h advancingHarness) Advance(ctx context.Context, d time.Duration) error {
	return h.c.advance(ctx, d)
}

// harness returns h, as a conformance.TimeAdvancer when the backend's clock
// can be advanced.
func (h *checkHarness) harness() conformance.Harness {
	if h.c.advance != nil {
		return advancingHarness{h}
	}
	return h
}

func (h *checkHarness) MakeStore(context.Context) (driver.Store, error) {
	n := h.n.Add(1)
	prefix := fmt.Sprintf("%s%d%s", h.prefix, n, h.c.sep)
	s, err := h.c.store(prefix)
	if err != nil {
		return nil, err
	}
	t := &trackedStore{Store: s, prefix: prefix, calls: &h.calls, keys: make(map[string]bool)}
	h.mu.Lock()
	h.stores = append(h.stores, t)
	h.mu.Unlock()
	return t, nil
}

// Close: the connection belongs to runCheck, which cleans up and closes it.
func (h *checkHarness) Close() {}

// progressEvery is how often a running check reports progress.
var progressEvery = 5 * time.Second

// showProgress prints a line to w every few seconds while the check runs.
// The returned function stops it.
func (h *checkHarness) showProgress(w io.Writer, start time.Time) func() {
	if w == io.Discard {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(w, "kvbreaker check: %s elapsed, %d cases started, %d store calls so far\n",
					time.Since(start).Round(time.Second), h.n.Load(), h.calls.Load())
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// cleanupTimeout bounds the deletion of what the check wrote, even after
// --timeout.
const cleanupTimeout = time.Minute

// cleanup deletes every key the check's stores wrote and returns how many
// it deleted and how many it could not (absent keys count as neither).
func (h *checkHarness) cleanup() (deleted, left int) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	h.mu.Lock()
	stores := slices.Clone(h.stores)
	h.mu.Unlock()
	for _, s := range stores {
		for _, key := range s.written() {
			err := deleteKey(ctx, s.Store, key)
			if err != nil && !errors.Is(err, driver.ErrNotFound) {
				left++
				continue
			}
			if err == nil {
				deleted++
			}
			// A backend that keeps expired entries or tombstones (a
			// DynamoDB delete leaves one, so a retried delete can
			// recognise itself) physically removes them too.
			if h.c.purge != nil && h.c.purge(ctx, s.prefix+key) != nil {
				left++
			}
		}
	}
	return deleted, left
}

// deleteKey deletes key whatever its version, retrying a few conflicts.
func deleteKey(ctx context.Context, s driver.Store, key string) error {
	var err error
	for range 5 {
		var ver driver.Version
		if _, ver, err = s.Get(ctx, key); err != nil {
			return err
		}
		if err = s.CompareAndDelete(ctx, key, ver); !errors.Is(err, driver.ErrConflict) {
			return err
		}
	}
	return err
}

// trackedStore remembers the keys written through it and counts calls.
type trackedStore struct {
	driver.Store
	prefix string
	calls  *atomic.Int64

	mu   sync.Mutex
	keys map[string]bool
}

func (s *trackedStore) written() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.keys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (s *trackedStore) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	s.calls.Add(1)
	return s.Store.Get(ctx, key)
}

func (s *trackedStore) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	s.calls.Add(1)
	if driver.ValidateKey(key) == nil {
		s.mu.Lock()
		s.keys[key] = true
		s.mu.Unlock()
	}
	return s.Store.CompareAndSwap(ctx, key, old, value, ttl)
}

func (s *trackedStore) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	s.calls.Add(1)
	return s.Store.CompareAndDelete(ctx, key, old)
}

// checkOutput is check's report, as JSON and as the table.
type checkOutput struct {
	Backend   string       `json:"backend"`
	Target    string       `json:"target"`
	Prefix    string       `json:"prefix"`
	Quick     bool         `json:"quick"`
	TimedOut  bool         `json:"timed_out,omitempty"`
	Seconds   float64      `json:"wall_seconds"`
	Declared  declaredJSON `json:"declared"`
	Promises  []promiseRow `json:"promises"`
	RoundTrip []roundTrip  `json:"round_trips"`
	Margin    marginJSON   `json:"ttl_margin"`
	Cases     []caseJSON   `json:"cases"`
	Broken    []string     `json:"broken_promises"`
	// NotVerified lists the promises the run could not check (a pass says
	// nothing about them), each with why.
	NotVerified []string    `json:"not_verified"`
	Cleanup     cleanupJSON `json:"cleanup"`
	OK          bool        `json:"ok"`
	Expiry      *expiryJSON `json:"expiry,omitempty"`
}

type declaredJSON struct {
	Atomic             bool    `json:"atomic"`
	ExpiryKind         string  `json:"expiry_kind"`
	GranularitySeconds float64 `json:"granularity_seconds"`
	MinTTLSeconds      float64 `json:"min_ttl_seconds"`
	EarlySeconds       float64 `json:"early_seconds"`
	LateSeconds        float64 `json:"late_seconds"`
	StalenessSeconds   float64 `json:"read_staleness_seconds"`
	MinWriteInterval   float64 `json:"min_write_interval_seconds"`
}

// promiseRow is one line of the promise table.
type promiseRow struct {
	Promise  string `json:"promise"`
	Declared string `json:"declared"`
	Measured string `json:"measured"`
	// Result is "ok", "BROKEN", "not run" or "not promised".
	Result string `json:"result"`
}

type roundTrip struct {
	Op         string  `json:"op"`
	N          int     `json:"n"`
	P50Seconds float64 `json:"p50_seconds"`
	P99Seconds float64 `json:"p99_seconds"`
}

type marginJSON struct {
	ClockSkewSeconds     float64 `json:"clock_skew_seconds"`
	NeededSeconds        float64 `json:"needed_seconds"`
	DeclaredModelSeconds float64 `json:"declared_model_seconds"`
}

type caseJSON struct {
	Case     string   `json:"case"`
	Status   string   `json:"status"` // pass, fail, skip, inconclusive
	Promise  string   `json:"promise"`
	Skipped  string   `json:"skipped,omitempty"`
	Problems []string `json:"problems,omitempty"`
	Notes    []string `json:"notes,omitempty"`
	// NotVerified and Inconclusive as in conformance.Result.
	NotVerified  []string `json:"not_verified,omitempty"`
	Inconclusive string   `json:"inconclusive,omitempty"`
}

type cleanupJSON struct {
	Deleted int `json:"deleted"`
	Left    int `json:"left"`
}

// expiryJSON is what the expiry case observed: the entry vanished between
// VanishedMin and VanishedMax after its write.
type expiryJSON struct {
	TTLSeconds         float64 `json:"ttl_seconds"`
	EffectiveSeconds   float64 `json:"effective_ttl_seconds"`
	VanishedMinSeconds float64 `json:"vanished_min_seconds"`
	VanishedMaxSeconds float64 `json:"vanished_max_seconds"`
	EarlySeconds       float64 `json:"early_seconds"`
	LateSeconds        float64 `json:"late_seconds"`
	ClockAdvanced      bool    `json:"clock_advanced"`
}

func secs(d time.Duration) float64 { return d.Seconds() }

// atomicCases are the cases that check a real compare.
var atomicCases = []string{"create-only", "stale-version-conflicts", "absent-with-version-conflicts",
	"compare-and-delete-stale", "recreate-new-version", "concurrent-cas-linearizable"}

func newCheckOutput(rep *conformance.Report, bf *backendFlags, c *conn, prefix string, elapsed time.Duration, quick, timedOut bool, deleted, left int) *checkOutput {
	t := rep.Traits
	m := t.Expiry
	o := &checkOutput{
		Backend: bf.backend, Target: c.describe, Prefix: prefix, Quick: quick, TimedOut: timedOut,
		Seconds: elapsed.Seconds(),
		Declared: declaredJSON{
			Atomic: t.Atomic, ExpiryKind: m.Kind.String(), GranularitySeconds: secs(m.Granularity),
			MinTTLSeconds: secs(m.MinTTL), EarlySeconds: secs(m.Early), LateSeconds: secs(m.Late),
			StalenessSeconds: secs(t.ReadStaleness), MinWriteInterval: secs(t.MinWriteInterval),
		},
		Cleanup: cleanupJSON{deleted, left},
	}
	byName := map[string]conformance.Result{}
	for _, r := range rep.Results {
		byName[r.Case] = r
		st := "pass"
		switch {
		case r.Skipped != "":
			st = "skip"
		case len(r.Problems) > 0:
			st = "fail"
			o.Broken = append(o.Broken, r.Problems...)
		case r.Inconclusive != "":
			st = "inconclusive"
		}
		o.Cases = append(o.Cases, caseJSON{Case: r.Case, Status: st, Promise: r.Promise, Skipped: r.Skipped, Problems: r.Problems, Notes: r.Notes,
			NotVerified: r.NotVerified, Inconclusive: r.Inconclusive})
	}
	o.NotVerified = rep.NotVerified()
	// status of a case, or of the problems of a case that mention sub.
	status := func(name, sub string) string {
		r, ok := byName[name]
		switch {
		case !ok || r.Skipped != "":
			return "not run"
		}
		for _, p := range r.Problems {
			if sub == "" || strings.Contains(p, sub) {
				return "BROKEN"
			}
		}
		return "ok"
	}

	// Compare-and-swap.
	cas := promiseRow{Promise: "compare-and-swap", Declared: "atomic"}
	if !t.Atomic {
		cas.Declared = "last writer wins"
		cas.Measured = "-"
		cas.Result = "not promised"
	} else {
		ran, failed := 0, 0
		for _, n := range atomicCases {
			switch status(n, "") {
			case "ok":
				ran++
			case "BROKEN":
				ran++
				failed++
			}
		}
		cas.Measured = fmt.Sprintf("%d of %d cases held", ran-failed, ran)
		switch {
		case failed > 0:
			cas.Result = "BROKEN"
		case ran == 0:
			cas.Result = "not run"
		default:
			cas.Result = "ok"
		}
	}
	o.Promises = append(o.Promises, cas)

	// Expiry.
	early := promiseRow{Promise: "expiry: not early", Declared: fmt.Sprintf("<= %v early", m.Early+m.Granularity)}
	late := promiseRow{Promise: "expiry: not late", Declared: fmt.Sprintf("<= %v late", lateBound(m))}
	if e := rep.Expiry; e != nil {
		how := "waited"
		if e.Advanced {
			how = "clock advanced"
		}
		o.Expiry = &expiryJSON{secs(e.TTL), secs(e.Effective), secs(e.Min), secs(e.Max), secs(e.Early), secs(e.Late), e.Advanced}
		early.Measured = fmt.Sprintf("%v early (ttl %v, %s)", e.Early.Round(time.Millisecond), e.Effective, how)
		late.Measured = fmt.Sprintf("%v late", e.Late.Round(time.Millisecond))
		early.Result = status("expiry", "must not vanish before")
		late.Result = status("expiry", "must vanish within")
	} else {
		early.Measured, late.Measured = "-", "-"
		early.Result = status("expiry", "must not vanish before")
		late.Result = status("expiry", "must vanish within")
		if quick && early.Result == "not run" {
			early.Measured, late.Measured = "skipped (--quick)", "skipped (--quick)"
		}
	}
	o.Promises = append(o.Promises, early, late)
	absent := promiseRow{Promise: "expired counts as absent", Declared: "Get, CAS, delete", Measured: "-", Result: status("expired-counts-as-absent", "")}
	if absent.Result == "ok" {
		absent.Measured = "yes"
	}
	o.Promises = append(o.Promises, absent)

	// Read staleness.
	stale := promiseRow{Promise: "read staleness", Declared: fmt.Sprintf("<= %v", t.ReadStaleness), Measured: "-", Result: status("read-staleness", "")}
	if t.ReadStaleness == 0 {
		stale.Declared = "0 (linearizable)"
	}
	if rep.StalenessMeasured {
		stale.Measured = fmt.Sprintf("%v", rep.Staleness.Round(time.Millisecond))
	}
	o.Promises = append(o.Promises, stale)
	fleet := promiseRow{Promise: "breakers share one circuit", Declared: "open, hold, one probe", Measured: "-", Result: status("breaker-fleet", "")}
	if fleet.Result == "ok" {
		fleet.Measured = "yes"
	}
	o.Promises = append(o.Promises, fleet)

	for _, rt := range rep.RoundTrips() {
		o.RoundTrip = append(o.RoundTrip, roundTrip{Op: rt.Op, N: rt.N, P50Seconds: secs(rt.P50), P99Seconds: secs(rt.P99)})
	}
	skew := bf.clockSkew
	o.Margin = marginJSON{ClockSkewSeconds: secs(skew), NeededSeconds: secs(rep.TTLMarginFor(skew)), DeclaredModelSeconds: secs(m.RequiredMargin(skew))}
	o.OK = len(o.Broken) == 0 && !timedOut
	for _, c := range o.Cases {
		// An inconclusive check has not passed: run check again.
		o.OK = o.OK && c.Status != "inconclusive"
	}
	return o
}

// lateBound is how late the declared model lets an entry vanish (as the
// conformance suite reads it: reader-filtered reads drop an entry on time
// however late the backend deletes it).
func lateBound(m driver.ExpiryModel) time.Duration {
	if m.Kind == driver.ExpiryRelative {
		return m.Late + m.Granularity
	}
	return m.Granularity
}

func (o *checkOutput) writeTable(w io.Writer) {
	d := o.Declared
	fmt.Fprintf(w, "kvbreaker check: %s (prefix %s, %.1fs)\n", o.Target, o.Prefix, o.Seconds)
	cas := "atomic compare-and-swap"
	if !d.Atomic {
		cas = "last writer wins"
	}
	fmt.Fprintf(w, "declared: %s; %s expiry, granularity %v, min TTL %v, early %v, late %v; read staleness %v; min write interval %v\n\n",
		cas, d.ExpiryKind, dur(d.GranularitySeconds), dur(d.MinTTLSeconds), dur(d.EarlySeconds), dur(d.LateSeconds), dur(d.StalenessSeconds), dur(d.MinWriteInterval))
	fmt.Fprintf(w, "%-28s %-22s %-38s %s\n", "PROMISE", "DECLARED", "MEASURED", "RESULT")
	for _, p := range o.Promises {
		fmt.Fprintf(w, "%-28s %-22s %-38s %s\n", p.Promise, p.Declared, p.Measured, p.Result)
	}
	fmt.Fprintln(w)
	if e := o.Expiry; e != nil {
		how := "waited in real time"
		if e.ClockAdvanced {
			how = "backend clock advanced"
		}
		fmt.Fprintf(w, "expiry: written with TTL %v (effective %v), vanished between %v and %v after the write (%s)\n",
			dur(e.TTLSeconds), dur(e.EffectiveSeconds), dur(e.VanishedMinSeconds).Round(time.Millisecond), dur(e.VanishedMaxSeconds).Round(time.Millisecond), how)
	}
	for _, rt := range o.RoundTrip {
		fmt.Fprintf(w, "round trip %-7s p50 %-10v p99 %-10v (%d calls)\n", rt.Op, dur(rt.P50Seconds).Round(time.Microsecond), dur(rt.P99Seconds).Round(time.Microsecond), rt.N)
	}
	fmt.Fprintf(w, "TTLMargin needed for clock skew %v: %v (declared model alone: %v)\n\n",
		dur(o.Margin.ClockSkewSeconds), dur(o.Margin.NeededSeconds), dur(o.Margin.DeclaredModelSeconds))
	pass, skip, fail := 0, 0, 0
	for _, c := range o.Cases {
		switch c.Status {
		case "pass":
			pass++
		case "skip":
			skip++
		default:
			fail++
		}
	}
	fmt.Fprintf(w, "cases: %d passed, %d skipped, %d failed or inconclusive\n", pass, skip, fail)
	for _, c := range o.Cases {
		switch c.Status {
		case "fail":
			fmt.Fprintf(w, "FAIL %s\n", c.Case)
			for _, p := range c.Problems {
				fmt.Fprintf(w, "     - %s\n", p)
			}
		case "skip":
			fmt.Fprintf(w, "skip %s: %s\n", c.Case, skipReason(c.Skipped))
		case "inconclusive":
			fmt.Fprintf(w, "INCONCLUSIVE %s: %s\n", c.Case, c.Inconclusive)
		}
	}
	if len(o.NotVerified) > 0 {
		fmt.Fprintf(w, "NOT VERIFIED (a pass says nothing about these):\n")
		for _, nv := range o.NotVerified {
			fmt.Fprintf(w, "     - %s\n", nv)
		}
	}
	if o.Cleanup.Left > 0 {
		fmt.Fprintf(w, "cleanup: %d keys deleted, %d left to expire\n", o.Cleanup.Deleted, o.Cleanup.Left)
	}
	switch {
	case o.TimedOut:
		fmt.Fprintln(w, "result: TIMED OUT (partial report)")
	case len(o.Broken) > 0:
		fmt.Fprintf(w, "result: the store breaks %d promise(s) it declares\n", len(o.Broken))
	case !o.OK:
		fmt.Fprintln(w, "result: INCONCLUSIVE (above): run check again")
	case len(o.NotVerified) > 0:
		fmt.Fprintf(w, "result: the store keeps every promise verified; %d not verified (above)\n", len(o.NotVerified))
	default:
		fmt.Fprintln(w, "result: the store keeps every promise it declares")
	}
}

// skipReason shortens a conformance skip message for the table.
func skipReason(s string) string {
	if strings.Contains(s, "waits in real time") {
		return "waits in real time (--quick)"
	}
	if strings.Contains(s, "Atomic == false") {
		return "not promised by a last-writer-wins store"
	}
	if _, after, ok := strings.Cut(s, ": "); ok {
		return after
	}
	return s
}

func dur(seconds float64) time.Duration { return time.Duration(seconds * float64(time.Second)) }
