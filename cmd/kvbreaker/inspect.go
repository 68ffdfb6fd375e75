package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
)

const inspectLong = `Shows the circuit of one remote host as the fleet stores it: state (closed,
open, half-open), the failures that still count, until when deliveries are
restrained and how long that is from now, whether a probe is in flight, the
stored record's size and version. It only reads. HOST may be a URL; it is
normalised as the breaker does it (kvbreaker.HostKey: lower case, IDNA, default
port dropped), so https://Example.COM:443/inbox and example.com are one host.

A host with no record is closed (never failed, or its record expired). When
the store can list keys and holds no record at all under --prefix, inspect
says so: the prefix is probably not the one your fleet uses.

` + backendFlagsHelp

const inspectExample = `  kvbreaker inspect --backend etcd --etcd-endpoints http://127.0.0.1:2379 mastodon.example
  kvbreaker inspect --backend dynamodb --dynamodb-table kvbreaker https://relay.example/inbox
  CLOUDFLARE_API_TOKEN=... kvbreaker inspect --backend cloudflarekv \
      --cf-account 0123abcd --cf-namespace 4567ef89 --format json hooks.example:8443`

const resetLong = `Force-closes the circuit of one remote host: deletes its record, so every
worker of the fleet sends to it again at once (after at most its breaker's
cache staleness). Use it when you know the host is back. Without --yes it
changes nothing and says so. HOST may be a URL, normalised as for inspect.

` + backendFlagsHelp

const resetExample = `  kvbreaker reset --backend etcd --etcd-endpoints http://127.0.0.1:2379 --yes mastodon.example
  kvbreaker reset --backend dynamodb --dynamodb-table kvbreaker --yes https://relay.example/inbox`

// storeFlags are what inspect, reset and list share: connection flags,
// --format and --timeout.
type storeFlags struct {
	bf      backendFlags
	format  string
	timeout time.Duration
}

func (s *storeFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	s.bf.register(fs)
	fs.StringVar(&s.format, "format", "table", "output format: table or json")
	fs.DurationVar(&s.timeout, "timeout", 30*time.Second, "give up after this long")
}

func (s *storeFlags) validate() error {
	if err := s.bf.applyEnv(); err != nil {
		return err
	}
	if err := checkFormat(s.format); err != nil {
		return err
	}
	if s.timeout <= 0 {
		return usagef("--timeout must be positive")
	}
	return s.bf.validate()
}

// open connects within --timeout and returns the connection, the store
// under --prefix and a Breaker over it with default settings (inspect,
// reset and list do not depend on thresholds).
func (s *storeFlags) open(ctx context.Context) (*conn, driver.Store, *kvbreaker.Breaker, error) {
	c, err := s.bf.open(ctx, s.timeout)
	if err != nil {
		return nil, nil, nil, err
	}
	store, err := c.prefixed(s.bf.prefix)
	if err != nil {
		c.close()
		return nil, nil, nil, err
	}
	b, err := kvbreaker.New(store, kvbreaker.Settings{
		ClockSkew:   s.bf.clockSkew,
		CallTimeout: s.timeout,
		// A last-writer-wins store makes Breaker warn; the help says so.
		Logger: slog.New(slog.DiscardHandler),
		// One command, then the store closes: a background clock sample
		// would only race that close.
		SkipClockCheck: true,
	})
	if err != nil {
		c.close()
		return nil, nil, nil, err
	}
	return c, store, b, nil
}

// hostArg normalises the one HOST argument.
func hostArg(args []string) (string, error) {
	switch {
	case len(args) == 0:
		return "", usagef("which host? give HOST (a host name or URL)")
	case len(args) > 1:
		return "", usagef("one HOST at a time: got %q", args)
	}
	host, err := kvbreaker.HostKey(args[0])
	if err != nil {
		return "", usagef("HOST %q: %v", args[0], err)
	}
	return host, nil
}

// statusJSON is a host's stored state as inspect and list print it.
type statusJSON struct {
	Host     string   `json:"host"`
	Found    bool     `json:"found"`
	State    string   `json:"state"`
	Failures []string `json:"failures"`
	// FailureCount is len(Failures).
	FailureCount int `json:"failure_count"`
	// RestrainedUntil is RFC 3339, null when the circuit is closed;
	// RestrainedForMS is how long from Now, null likewise.
	RestrainedUntil *string  `json:"restrained_until"`
	RestrainedForMS *float64 `json:"restrained_for_ms"`
	Probing         bool     `json:"probing"`
	RecordBytes     int      `json:"record_bytes"`
	Version         uint64   `json:"version"`
	// RecordValid is false when the stored record could not be decoded
	// (the breaker treats it as absent); Message then says why.
	RecordValid bool    `json:"record_valid"`
	Message     *string `json:"message"`
	Now         string  `json:"now"`
}

func newStatus(s kvbreaker.Status, now time.Time) statusJSON {
	out := statusJSON{Host: s.Host, Found: s.Found, State: s.State.String(), Failures: []string{}, FailureCount: len(s.Failures),
		Probing: s.Probing, RecordBytes: s.Size, Version: uint64(s.Version), RecordValid: s.Err == nil,
		Now: now.UTC().Format(time.RFC3339Nano)}
	for _, f := range s.Failures {
		out.Failures = append(out.Failures, f.UTC().Format(time.RFC3339Nano))
	}
	if ru := s.RestrainedUntil; !ru.IsZero() {
		out.RestrainedUntil = strp(ru.UTC().Format(time.RFC3339Nano))
		out.RestrainedForMS = msp(max(0, ru.Sub(now)))
	}
	if s.Err != nil {
		out.Message = strp(s.Err.Error())
	}
	return out
}

func (s statusJSON) writeTable(w io.Writer) {
	fmt.Fprintf(w, "host:              %s\n", s.Host)
	if !s.Found {
		fmt.Fprintf(w, "state:             %s (no record: never failed, reset, or expired)\n", s.State)
		return
	}
	fmt.Fprintf(w, "state:             %s\n", s.State)
	fmt.Fprintf(w, "failures:          %d\n", len(s.Failures))
	for _, f := range s.Failures {
		fmt.Fprintf(w, "                   %s\n", f)
	}
	if s.RestrainedUntil != nil {
		fmt.Fprintf(w, "restrained until:  %s (%v from now)\n", *s.RestrainedUntil, fromMS(*s.RestrainedForMS).Round(time.Second))
	} else {
		fmt.Fprintf(w, "restrained until:  -\n")
	}
	fmt.Fprintf(w, "probing:           %v\n", s.Probing)
	fmt.Fprintf(w, "record:            %d bytes, version %d\n", s.RecordBytes, s.Version)
	if !s.RecordValid {
		fmt.Fprintf(w, "decode error:      %s (the breaker treats the record as absent)\n", *s.Message)
	}
}

// inspectJSONOut is inspect's JSON: the status, and whether the prefix
// holds any record at all (null when the store cannot list).
type inspectJSONOut struct {
	statusJSON
	Prefix        string `json:"prefix"`
	PrefixHasKeys *bool  `json:"prefix_has_records"`
}

func newInspectCmd() *cobra.Command {
	var s storeFlags
	cmd := &cobra.Command{
		Use:     "inspect --backend NAME [connection flags] [flags] HOST",
		Short:   "show a remote host's circuit as the fleet stores it",
		Long:    inspectLong,
		Example: inspectExample,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runInspect(cmd.Context(), &s, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	s.register(cmd)
	completeFlags(cmd)
	return cmd
}

func runInspect(ctx context.Context, s *storeFlags, args []string, stdout, stderr io.Writer) error {
	host, err := hostArg(args)
	if err != nil {
		return err
	}
	if err := s.validate(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	c, store, b, err := s.open(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	st, err := b.Inspect(ctx, host)
	if err != nil {
		return err
	}
	out := inspectJSONOut{statusJSON: newStatus(st, time.Now()), Prefix: s.bf.prefix}
	if !st.Found {
		// No record for this host: is there any record under the prefix?
		keys, _, lerr := listPage(ctx, store, "", 1)
		if lerr == nil {
			has := len(keys) > 0
			out.PrefixHasKeys = &has
			if !has {
				fmt.Fprintf(stderr, "note: %s holds no record at all under prefix %q: is --prefix the one your fleet's Breakers use (kvbreaker.Prefixed)?\n", c.describe, s.bf.prefix)
			}
		}
	}
	if s.format == "json" {
		return writeJSON(stdout, out)
	}
	out.writeTable(stdout)
	return nil
}

func newResetCmd() *cobra.Command {
	var s storeFlags
	var yes bool
	cmd := &cobra.Command{
		Use:     "reset --backend NAME [connection flags] --yes HOST",
		Short:   "force-close a remote host's circuit (with --yes)",
		Long:    resetLong,
		Example: resetExample,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReset(cmd.Context(), &s, yes, args, cmd.OutOrStdout())
		},
	}
	s.register(cmd)
	cmd.Flags().BoolVar(&yes, "yes", false, "really force-close the circuit (without it, reset only says what it would do)")
	completeFlags(cmd)
	return cmd
}

func runReset(ctx context.Context, s *storeFlags, yes bool, args []string, stdout io.Writer) error {
	host, err := hostArg(args)
	if err != nil {
		return err
	}
	if err := s.validate(); err != nil {
		return err
	}
	if !yes {
		return usagef("not resetting %s without confirmation: add --yes to force-close its circuit for the whole fleet", host)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	c, _, b, err := s.open(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	before, err := b.Inspect(ctx, host)
	if err != nil {
		return err
	}
	if err := b.Reset(ctx, host); err != nil {
		return err
	}
	if s.format == "json" {
		return writeJSON(stdout, struct {
			Host   string `json:"host"`
			Before string `json:"state_before"`
			After  string `json:"state"`
			Found  bool   `json:"had_record"`
		}{host, before.State.String(), kvbreaker.StateClosed.String(), before.Found})
	}
	if before.Found {
		fmt.Fprintf(stdout, "%s: %s -> closed (record deleted)\n", host, before.State)
	} else {
		fmt.Fprintf(stdout, "%s: already closed (no record)\n", host)
	}
	return nil
}

// errNoLister is returned for a store that cannot enumerate its keys.
var errNoLister = fmt.Errorf("the store cannot list its keys (it does not implement driver.Lister): %w", errors.ErrUnsupported)

// listPage lists one page of keys of store (already under --prefix).
func listPage(ctx context.Context, store driver.Store, cursor string, limit int) ([]string, string, error) {
	l, ok := store.(driver.Lister)
	if !ok {
		return nil, "", errNoLister
	}
	return l.List(ctx, "", cursor, limit)
}
