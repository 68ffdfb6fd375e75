package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/kvbreaker/kvbreaker"
)

const inspectHelp = `Usage: kvbreaker inspect --backend NAME [connection flags] [flags] HOST

Shows the circuit of one remote host as the fleet stores it: state (closed,
open, half-open), the failures that still count, until when deliveries are
restrained and how long that is from now, whether a probe is in flight, the
stored record's size and version. It only reads. HOST may be a URL; it is
normalised as the breaker does it (kvbreaker.HostKey: lower case, IDNA, default
port dropped), so https://Example.COM:443/inbox and example.com are one host.

A host with no record is closed (never failed, or its record expired).

Examples:
  kvbreaker inspect --backend etcd --etcd-endpoints http://127.0.0.1:2379 mastodon.example
  kvbreaker inspect --backend dynamodb --dynamodb-table kvbreaker https://relay.example/inbox
  CLOUDFLARE_API_TOKEN=... kvbreaker inspect --backend cloudflarekv \
      --cf-account 0123abcd --cf-namespace 4567ef89 --format json hooks.example:8443

`

const resetHelp = `Usage: kvbreaker reset --backend NAME [connection flags] --yes HOST

Force-closes the circuit of one remote host: deletes its record, so every
worker of the fleet sends to it again at once (after at most its breaker's
cache staleness). Use it when you know the host is back. Without --yes it
changes nothing and says so. HOST may be a URL, normalised as for inspect.

Examples:
  kvbreaker reset --backend etcd --etcd-endpoints http://127.0.0.1:2379 --yes mastodon.example
  kvbreaker reset --backend dynamodb --dynamodb-table kvbreaker --yes https://relay.example/inbox

`

// hostCommand is what inspect and reset share: flags, one HOST argument,
// a Breaker over the backend.
type hostCommand struct {
	name    string
	bf      backendFlags
	fs      *flag.FlagSet
	format  *string
	timeout *time.Duration
	stderr  io.Writer
}

func newHostCommand(name, help string, stderr io.Writer) *hostCommand {
	h := &hostCommand{name: name, fs: flag.NewFlagSet(name, flag.ContinueOnError), stderr: stderr}
	h.fs.SetOutput(stderr)
	h.fs.Usage = func() {
		fmt.Fprint(h.fs.Output(), help)
		fmt.Fprint(h.fs.Output(), backendFlagsHelp)
		fmt.Fprint(h.fs.Output(), "\nFlags:\n")
		h.fs.PrintDefaults()
	}
	h.bf.register(h.fs)
	h.format = h.fs.String("format", "table", "output format: table or json")
	h.timeout = h.fs.Duration("timeout", 30*time.Second, "give up after this long")
	return h
}

func (h *hostCommand) bad(format string, a ...any) int {
	fmt.Fprintf(h.stderr, "kvbreaker %s: "+format+"\nRun \"kvbreaker %s --help\" for the flags.\n", append(append([]any{h.name}, a...), h.name)...)
	return exitUsage
}

// parse parses args and returns the normalised host, or an exit code.
func (h *hostCommand) parse(args []string) (string, int) {
	// Flags may follow HOST too: "kvbreaker inspect example.com --backend etcd".
	var pos []string
	for {
		if err := h.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return "", exitOK
			}
			return "", exitUsage
		}
		if h.fs.NArg() == 0 {
			break
		}
		pos = append(pos, h.fs.Arg(0))
		args = h.fs.Args()[1:]
	}
	switch {
	case len(pos) == 0:
		return "", h.bad("which host? give HOST (a host name or URL) after the flags")
	case len(pos) > 1:
		return "", h.bad("one HOST at a time: got %q", pos)
	case *h.format != "table" && *h.format != "json":
		return "", h.bad("--format is %q: want table or json", *h.format)
	case *h.timeout <= 0:
		return "", h.bad("--timeout must be positive")
	}
	host, err := kvbreaker.HostKey(pos[0])
	if err != nil {
		return "", h.bad("HOST %q: %v", pos[0], err)
	}
	if err := h.bf.validate(); err != nil {
		return "", h.bad("%v", err)
	}
	return host, -1
}

// breaker opens the backend and returns a Breaker over it with default
// settings (inspect and reset do not depend on thresholds), and a function
// that releases it.
func (h *hostCommand) breaker(ctx context.Context) (*kvbreaker.Breaker, func(), int) {
	c, err := h.bf.open(ctx)
	if err != nil {
		return nil, nil, openFailed(h.name, err, h.stderr)
	}
	store, err := c.store(h.bf.basePrefix(c))
	if err != nil {
		c.close()
		return nil, nil, openFailed(h.name, err, h.stderr)
	}
	b, err := kvbreaker.New(store, kvbreaker.Settings{
		ClockSkew:   h.bf.clockSkew,
		CallTimeout: *h.timeout,
		// A last-writer-wins store makes Breaker warn; the help says so.
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		c.close()
		fmt.Fprintf(h.stderr, "kvbreaker %s: %v\n", h.name, err)
		return nil, nil, exitFail
	}
	return b, c.close, -1
}

// statusJSON is a host's stored state as inspect prints it.
type statusJSON struct {
	Host            string   `json:"host"`
	Found           bool     `json:"found"`
	State           string   `json:"state"`
	Failures        []string `json:"failures"`
	RestrainedUntil string   `json:"restrained_until,omitempty"`
	TimeLeftSeconds float64  `json:"time_left_seconds"`
	Probing         bool     `json:"probing"`
	Size            int      `json:"record_bytes"`
	Version         uint64   `json:"version"`
	DecodeError     string   `json:"decode_error,omitempty"`
	Now             string   `json:"now"`
}

func newStatus(s kvbreaker.Status, now time.Time) statusJSON {
	out := statusJSON{Host: s.Host, Found: s.Found, State: s.State.String(), Failures: []string{},
		Probing: s.Probing, Size: s.Size, Version: uint64(s.Version), Now: now.UTC().Format(time.RFC3339Nano)}
	for _, f := range s.Failures {
		out.Failures = append(out.Failures, f.UTC().Format(time.RFC3339Nano))
	}
	if ru := s.RestrainedUntil; !ru.IsZero() {
		out.RestrainedUntil = ru.UTC().Format(time.RFC3339Nano)
		out.TimeLeftSeconds = max(0, ru.Sub(now)).Seconds()
	}
	if s.Err != nil {
		out.DecodeError = s.Err.Error()
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
	if s.RestrainedUntil != "" {
		left := time.Duration(s.TimeLeftSeconds * float64(time.Second)).Round(time.Second)
		fmt.Fprintf(w, "restrained until:  %s (%v from now)\n", s.RestrainedUntil, left)
	} else {
		fmt.Fprintf(w, "restrained until:  -\n")
	}
	fmt.Fprintf(w, "probing:           %v\n", s.Probing)
	fmt.Fprintf(w, "record:            %d bytes, version %d\n", s.Size, s.Version)
	if s.DecodeError != "" {
		fmt.Fprintf(w, "decode error:      %s (the breaker treats the record as absent)\n", s.DecodeError)
	}
}

// runInspect is the inspect subcommand.
func runInspect(args []string, stdout, stderr io.Writer) int {
	h := newHostCommand("inspect", inspectHelp, stderr)
	host, code := h.parse(args)
	if code >= 0 {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), *h.timeout)
	defer cancel()
	b, done, code := h.breaker(ctx)
	if code >= 0 {
		return code
	}
	defer done()
	st, err := b.Inspect(ctx, host)
	if err != nil {
		fmt.Fprintf(stderr, "kvbreaker inspect: %v\n", err)
		return exitFail
	}
	out := newStatus(st, time.Now())
	if *h.format == "json" {
		return writeJSON(stdout, stderr, "inspect", out)
	}
	out.writeTable(stdout)
	return exitOK
}

// runReset is the reset subcommand.
func runReset(args []string, stdout, stderr io.Writer) int {
	h := newHostCommand("reset", resetHelp, stderr)
	yes := h.fs.Bool("yes", false, "really force-close the circuit (without it, reset only says what it would do)")
	host, code := h.parse(args)
	if code >= 0 {
		return code
	}
	if !*yes {
		fmt.Fprintf(stderr, "kvbreaker reset: not resetting %s without confirmation: add --yes to force-close its circuit for the whole fleet\n", host)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), *h.timeout)
	defer cancel()
	b, done, code := h.breaker(ctx)
	if code >= 0 {
		return code
	}
	defer done()
	before, err := b.Inspect(ctx, host)
	if err != nil {
		fmt.Fprintf(stderr, "kvbreaker reset: %v\n", err)
		return exitFail
	}
	if err := b.Reset(ctx, host); err != nil {
		fmt.Fprintf(stderr, "kvbreaker reset: %v\n", err)
		return exitFail
	}
	out := struct {
		Host   string `json:"host"`
		Before string `json:"state_before"`
		After  string `json:"state"`
		Found  bool   `json:"had_record"`
	}{host, before.State.String(), kvbreaker.StateClosed.String(), before.Found}
	if *h.format == "json" {
		return writeJSON(stdout, stderr, "reset", out)
	}
	if before.Found {
		fmt.Fprintf(stdout, "%s: %s -> closed (record deleted)\n", host, before.State)
	} else {
		fmt.Fprintf(stdout, "%s: already closed (no record)\n", host)
	}
	return exitOK
}

func writeJSON(stdout, stderr io.Writer, cmd string, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(stderr, "kvbreaker %s: %v\n", cmd, err)
		return exitFail
	}
	return exitOK
}
