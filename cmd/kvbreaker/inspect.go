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

	"github.com/kvbreaker/kvbreaker/internal/output"
)

var inspectLong = `Shows the circuit of one remote host as the fleet stores it: state (closed,
open, half-open), the failures that still count, until when deliveries are
restrained and how long that is from now, whether a probe is in flight, the
stored record's size and version, and how long the store keeps it. It only
reads.

HOST is taken exactly as given when a record is stored under that key (so
every key list prints works, capitals and all); otherwise it is normalised
as the breaker does it (kvbreaker.HostKey: lower case, IDNA, default port
dropped), so https://Example.COM:443/inbox and example.com are one host.

A record that cannot be decoded is shown with the decode error (the breaker
treats it as absent, and its next write replaces it). A record the store
fails to read is an error: inspect exits 1 with it (list shows such a key as
unreadable and exits 1 too).

"expires" is how long the store keeps the key, when the store can say
(driver.ExpiryReader). "never" is a warning, also on stderr: every write of
a Breaker carries a TTL, so something else wrote that key, and if it
restrains its host it does so until kvbreaker reset.

A host with no record is closed (never failed, or its record expired). When
the store can list keys, inspect then searches its first 10000 keys, within
--timeout, for a record of the host under another prefix (or none), and says
which --prefix finds it; and it says when the store holds no record at all under --prefix
(read to the end, not one page): the prefix is probably not the one your
fleet uses.

` + backendFlagsHelp

var resetLong = `Force-closes the circuit of one remote host: deletes its record, so every
worker of the fleet sends to it again at once (after at most its breaker's
cache staleness). Use it when you know the host is back. Without --yes it
changes nothing and says so. HOST is found as for inspect: exactly as given
when a record is stored under that key (what list prints), else normalised
(kvbreaker.HostKey), so a URL works. A record the store cannot read is
deleted all the same (the read error is shown as the state before). When the
host has no record under --prefix but has one under another prefix, reset
says which --prefix finds it (as inspect does).

` + backendFlagsHelp

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
	store, err := kvbreaker.Prefixed(c.store, s.bf.prefix)
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

// hostArg checks the one HOST argument; resolveHost makes it a key.
func hostArg(args []string) (string, error) {
	switch {
	case len(args) == 0:
		return "", usagef("which host? give HOST (a host name or URL)")
	case len(args) > 1:
		return "", usagef("one HOST at a time: got %q", args)
	}
	arg := args[0]
	if _, err := kvbreaker.HostKey(arg); err != nil && driver.ValidateKey(arg) != nil {
		return "", usagef("HOST %q: %v", arg, err)
	}
	return arg, nil
}

// resolveHost finds the key HOST names and reads it: HOST exactly as given
// when a record is stored under it (what list prints, capitals and all),
// else HOST normalised as the breaker does it (kvbreaker.HostKey). A read
// error of the exact key is returned as it is: that key exists but cannot
// be read.
func resolveHost(ctx context.Context, b *kvbreaker.Breaker, arg string) (string, kvbreaker.Status, error) {
	norm, nerr := kvbreaker.HostKey(arg)
	if arg != norm && driver.ValidateKey(arg) == nil {
		st, err := b.Inspect(ctx, arg)
		if err != nil || st.Found {
			return arg, st, err
		}
	}
	if nerr != nil {
		return "", kvbreaker.Status{}, usagef("HOST %q: no record under exactly this key, and it is no host name or URL: %v", arg, nerr)
	}
	st, err := b.Inspect(ctx, norm)
	return norm, st, err
}

// Expiry says how long the store keeps a key, as inspect and list print it.
const (
	expiryTTL     = "ttl"     // ExpiresInMS from Now
	expiryNever   = "never"   // stored without an expiry: no Breaker wrote it
	expiryUnknown = "unknown" // the store cannot say (no driver.ExpiryReader), or reading it failed
)

// readExpiry asks store (already under --prefix) how long it keeps key.
// why says what went wrong when kind is expiryUnknown ("" when the store
// cannot tell at all).
func readExpiry(ctx context.Context, store driver.Store, key string) (kind string, left time.Duration, why string) {
	r, ok := store.(driver.ExpiryReader)
	if !ok {
		return expiryUnknown, 0, ""
	}
	d, err := r.Expiry(ctx, key)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return expiryUnknown, 0, ""
	case errors.Is(err, driver.ErrNotFound):
		return expiryUnknown, 0, "the key was gone when its expiry was read"
	case err != nil:
		return expiryUnknown, 0, err.Error()
	case d == driver.NoExpiry:
		return expiryNever, 0, ""
	}
	return expiryTTL, max(0, d), ""
}

// noExpiryWarning is what inspect and list say of a key stored without an
// expiry.
const noExpiryWarning = "stored without an expiry, so no Breaker wrote it (every write of a Breaker carries a TTL); " +
	"a record there that restrains its host does so until someone runs kvbreaker reset"

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
	// (the breaker treats it as absent, and its next write replaces it)
	// or, in list, read; Message then says why.
	RecordValid bool `json:"record_valid"`
	// Unreadable (list only): the store failed to read the key (inspect
	// exits 1 with that error instead). State is then "unknown".
	Unreadable bool    `json:"unreadable"`
	Message    *string `json:"message"`
	// Expiry says how long the store keeps the key: "ttl" (ExpiresInMS
	// from Now), "never" (stored without an expiry, so not by a Breaker:
	// a restraint there holds its host until reset) or "unknown" (the
	// store cannot say: no driver.ExpiryReader); null without a record.
	Expiry      *string  `json:"expiry"`
	ExpiresInMS *float64 `json:"expires_in_ms"`
	// ExpiryError says why Expiry is "unknown" when reading it failed.
	ExpiryError *string `json:"expiry_error"`
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

// unreadableStatus is list's row for a key the store failed to read.
func unreadableStatus(key string, err error, now time.Time) statusJSON {
	return statusJSON{Host: key, Found: true, State: "unknown", Failures: []string{}, Unreadable: true,
		Message: strp(err.Error()), Now: now.UTC().Format(time.RFC3339Nano)}
}

// addExpiry reads how long the store keeps the status's key.
func (s *statusJSON) addExpiry(ctx context.Context, store driver.Store) {
	if !s.Found {
		return
	}
	kind, left, why := readExpiry(ctx, store, s.Host)
	s.Expiry = strp(kind)
	if kind == expiryTTL {
		s.ExpiresInMS = msp(left)
	}
	if why != "" {
		s.ExpiryError = strp(why)
	}
}

// noExpiry reports a key stored without an expiry.
func (s statusJSON) noExpiry() bool { return s.Expiry != nil && *s.Expiry == expiryNever }

// expiresText is the expiry in a few words, for tables.
func (s statusJSON) expiresText() string {
	switch {
	case s.Expiry == nil:
		return "-"
	case *s.Expiry == expiryTTL:
		return fromMS(*s.ExpiresInMS).Round(time.Second).String()
	}
	return *s.Expiry
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
		fmt.Fprintf(w, "decode error:      %s (the breaker treats the record as absent; its next write replaces it)\n", *s.Message)
	}
	switch {
	case s.Expiry == nil:
	case *s.Expiry == expiryTTL:
		fmt.Fprintf(w, "expires:           in %v (the store deletes the key then)\n", fromMS(*s.ExpiresInMS).Round(time.Millisecond))
	case *s.Expiry == expiryNever:
		fmt.Fprintf(w, "expires:           never: %s\n", noExpiryWarning)
	case s.ExpiryError != nil:
		fmt.Fprintf(w, "expires:           unknown (%s)\n", *s.ExpiryError)
	default:
		fmt.Fprintf(w, "expires:           unknown (the store cannot say: it is no driver.ExpiryReader)\n")
	}
}

// inspectJSONOut is inspect's JSON: the status, and whether the prefix
// holds any record at all (null when the store cannot list).
type inspectJSONOut struct {
	statusJSON
	Prefix        string `json:"prefix"`
	PrefixHasKeys *bool  `json:"prefix_has_records"`
	// ElsewhereUnder lists the other prefixes under which the host has a
	// record ("" for none), when it has none under Prefix;
	// ElsewhereSearched says whether the whole store was searched (false
	// when --timeout ended the search; null when the store cannot list,
	// or the host has a record here).
	ElsewhereUnder    []string `json:"elsewhere_under"`
	ElsewhereSearched *bool    `json:"elsewhere_searched"`
}

func newInspectCmd() *cobra.Command {
	var s storeFlags
	cmd := &cobra.Command{
		Use:     "inspect --backend NAME [connection flags] [flags] HOST",
		Short:   "show a remote host's circuit as the fleet stores it",
		Long:    inspectLong,
		Example: examples("inspect", "mastodon.example", "--format json hooks.example:8443", "https://relay.example/inbox"),
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
	_, st, err := resolveHost(ctx, b, host)
	if err != nil {
		return err
	}
	out := inspectJSONOut{statusJSON: newStatus(st, time.Now()), Prefix: s.bf.prefix, ElsewhereUnder: []string{}}
	out.addExpiry(ctx, store)
	if out.noExpiry() {
		fmt.Fprintf(stderr, "warning: %s is %s\n", st.Host, noExpiryWarning)
	}
	var notes []string
	if !st.Found {
		// No record for this host under --prefix: is there one under
		// another prefix, and any record at all under this one?
		if found, err := findElsewhere(ctx, c.store, s.bf.prefix, st.Host); err == nil {
			out.ElsewhereUnder = found.Prefixes
			out.ElsewhereSearched = &found.Complete
			switch {
			case len(found.Prefixes) > 0:
				notes = append(notes, elsewhereNote(st.Host, found))
			case !found.Complete:
				notes = append(notes, fmt.Sprintf("searched the first %d keys of %s for %s under other prefixes, not all (at most %d, within --timeout %v): none there", found.Searched, c.describe, st.Host, maxSearch, s.timeout))
			}
		}
		if has, known, err := hasRecords(ctx, store, ""); err == nil && known {
			out.PrefixHasKeys = &has
			if !has {
				notes = append(notes, fmt.Sprintf("%s holds no record at all under prefix %q: is --prefix the one your fleet's Breakers use (kvbreaker.Prefixed)?", c.describe, s.bf.prefix))
			}
		}
	}
	if s.format == "json" {
		err = output.JSON(stdout, out)
	} else {
		out.writeTable(stdout)
	}
	for _, n := range notes {
		fmt.Fprintf(stderr, "note: %s\n", n)
	}
	return err
}

func newResetCmd() *cobra.Command {
	var s storeFlags
	var yes bool
	cmd := &cobra.Command{
		Use:     "reset --backend NAME [connection flags] --yes HOST",
		Short:   "force-close a remote host's circuit (with --yes)",
		Long:    resetLong,
		Example: examples("reset", "--yes mastodon.example", "--yes https://relay.example/inbox"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReset(cmd.Context(), &s, yes, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	s.register(cmd)
	cmd.Flags().BoolVar(&yes, "yes", false, "really force-close the circuit (without it, reset only says what it would do)")
	completeFlags(cmd)
	return cmd
}

func runReset(ctx context.Context, s *storeFlags, yes bool, args []string, stdout, stderr io.Writer) error {
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
	// A record that cannot be read is still reset: deleting it is what
	// reset is for (the read error is reported as the state before).
	host, before, readErr := resolveHost(ctx, b, host)
	if _, ok := errors.AsType[*usageError](readErr); ok {
		return readErr
	}
	if err := b.Reset(ctx, host); err != nil {
		return err
	}
	was := before.State.String()
	if readErr != nil {
		was = "unknown"
	}
	if s.format == "json" {
		var msg *string
		if readErr != nil {
			msg = strp(readErr.Error())
		}
		return output.JSON(stdout, struct {
			Host   string `json:"host"`
			Before string `json:"state_before"`
			After  string `json:"state"`
			Found  bool   `json:"had_record"`
			// Unreadable: the record could not be read before it was
			// deleted; Message says why.
			Unreadable bool    `json:"unreadable"`
			Message    *string `json:"message"`
		}{host, was, kvbreaker.StateClosed.String(), before.Found || readErr != nil, readErr != nil, msg})
	}
	switch {
	case readErr != nil:
		fmt.Fprintf(stdout, "%s: unreadable (%v) -> closed (record deleted)\n", host, readErr)
	case before.Found:
		fmt.Fprintf(stdout, "%s: %s -> closed (record deleted)\n", host, before.State)
	default:
		fmt.Fprintf(stdout, "%s: already closed (no record)\n", host)
	}
	if !before.Found && readErr == nil {
		// Nothing was reset: was the host meant under another prefix?
		if found, err := findElsewhere(ctx, c.store, s.bf.prefix, host); err == nil && len(found.Prefixes) > 0 {
			fmt.Fprintf(stderr, "note: nothing reset: %s\n", elsewhereNote(host, found))
		}
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
