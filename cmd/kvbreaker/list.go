package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvbreaker/kvbreaker/driver"

	"github.com/kvbreaker/kvbreaker/internal/output"
)

var listLong = `Lists the hosts that have a record under --prefix, with their state, the
failures that still count, until when deliveries are restrained and whether a
probe is in flight: which hosts are open right now.

It reads one page of at most --limit keys per run and prints the cursor of the
next page (--cursor continues from it); --all reads every page, within
--timeout. --state keeps only the hosts in that state (the page is still
--limit keys read, so a filtered page may show fewer hosts). It needs a store
that can list its keys (driver.Lister, as every backend's store is); for
another store it says so and exits 1. It only reads.

Keys under a longer prefix (another fleet's: "fleet-a/host" when --prefix is
not given, "prod/eu/host" under --prefix prod/) are no hosts of this prefix:
list counts them by prefix and says which --prefix lists them. "holds no
record" is said only when no page to the end holds one.

Every key is listed as the store holds it (HOST in the table; shell-quoted
when a shell would split it): give it to inspect or reset as it is printed.
A record that cannot be decoded is listed as "undecodable" with the decode
error (the breaker treats it as absent, and its next write replaces it). A
key the store fails to read is listed as "unreadable" with the store's
error, whatever --state, and list carries on with the other keys; it then
prints everything and exits 1, as inspect of that host exits 1.

EXPIRES IN is how long the store keeps the key, when the store can say
(driver.ExpiryReader; "unknown" otherwise). "never" is a warning: every
write of a Breaker carries a TTL, so something else wrote that key, and if
it restrains its host it does so until kvbreaker reset.

` + backendFlagsHelp

// maxLimit bounds --limit: one page is read and inspected in one go.
const maxLimit = 1000

type listFlags struct {
	storeFlags
	state  string
	limit  int
	cursor string
	all    bool
}

func newListCmd() *cobra.Command {
	var f listFlags
	cmd := &cobra.Command{
		Use:     "list --backend NAME [connection flags] [flags]",
		Short:   "list the hosts with a record, and their state (which are open now)",
		Long:    listLong,
		Example: examples("list", "--state open", "--cursor mastodon.example", "--all --format json"),
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runList(cmd.Context(), &f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.register(cmd)
	fs := cmd.Flags()
	fs.StringVar(&f.state, "state", "", "only hosts in this state: open, half-open or closed")
	fs.IntVar(&f.limit, "limit", 100, fmt.Sprintf("keys read per page (at most %d)", maxLimit))
	fs.StringVar(&f.cursor, "cursor", "", "continue after this cursor (printed by the previous page)")
	fs.BoolVar(&f.all, "all", false, "read every page, not just one (within --timeout)")
	completeFlags(cmd)
	return cmd
}

// listOutput is list's JSON.
type listOutput struct {
	Target string       `json:"target"`
	Prefix string       `json:"prefix"`
	State  *string      `json:"state"`
	Hosts  []statusJSON `json:"hosts"`
	// Scanned is how many keys were read.
	Scanned int `json:"scanned"`
	// NextCursor continues the listing (--cursor); null after the last
	// page.
	NextCursor *string `json:"next_cursor"`
	// Unreadable counts the hosts the store failed to read (list then
	// exits 1), Undecodable those whose record could not be decoded, and
	// NoExpiry the keys stored without an expiry.
	Unreadable  int `json:"unreadable"`
	Undecodable int `json:"undecodable"`
	NoExpiry    int `json:"no_expiry"`
	// OtherPrefixes counts the keys read that belong under a longer
	// prefix (another fleet's, kvbreaker.Prefixed): not hosts, not listed.
	OtherPrefixes []prefixCount `json:"other_prefixes"`
	// NotBreakers counts the keys under the prefix that
	// kvbreaker.Prefixed cannot have written (a '%' that is no escape).
	NotBreakers int `json:"not_breakers"`
}

// prefixCount is how many keys list read under one other prefix.
type prefixCount struct {
	Prefix string `json:"prefix"`
	Keys   int    `json:"keys"`
}

// page lists one page of raw (the store, not under --prefix) under
// --prefix, and returns the keys of this prefix's Breakers; the names of
// keys under a longer prefix are counted in other by that prefix, and
// those no Breaker can have written through this prefix in notBreakers.
func (f *listFlags) page(ctx context.Context, raw driver.Store, cursor string, other map[string]int, notBreakers *int) ([]string, string, error) {
	l, ok := raw.(driver.Lister)
	if !ok {
		return nil, "", errNoLister
	}
	names, next, err := l.List(ctx, f.bf.prefix, cursor, f.limit)
	if err != nil {
		return nil, "", err
	}
	var keys []string
	for _, name := range names {
		p, key, ok := splitName(name)
		switch {
		case !strings.HasPrefix(name, f.bf.prefix):
			// Not asked for: a store's List keeps to its prefix.
		case p != f.bf.prefix:
			other[p]++
		case !ok:
			*notBreakers++
		default:
			keys = append(keys, key)
		}
	}
	return keys, next, nil
}

func runList(ctx context.Context, f *listFlags, stdout, stderr io.Writer) error {
	if err := f.validate(); err != nil {
		return err
	}
	switch f.state {
	case "", "open", "half-open", "closed":
	default:
		return usagef("--state is %q: want open, half-open or closed", f.state)
	}
	if f.limit <= 0 || f.limit > maxLimit {
		return usagef("--limit is %d: want 1 to %d", f.limit, maxLimit)
	}
	if f.all && f.cursor != "" {
		return usagef("--all reads from the first page: drop --cursor")
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	c, store, b, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	out := listOutput{Target: c.describe, Prefix: f.bf.prefix, Hosts: []statusJSON{}}
	if f.state != "" {
		out.State = strp(f.state)
	}
	cursor := f.cursor
	other := map[string]int{}
	// A store may list a key again on a later page (driver.Lister: a
	// SCAN repeats keys while its hash table is rehashed); a host is one row.
	seen := map[string]bool{}
	for {
		keys, next, err := f.page(ctx, c.store, cursor, other, &out.NotBreakers)
		if err != nil {
			if errors.Is(err, errors.ErrUnsupported) {
				return fmt.Errorf("list: %s: %w", c.describe, errNoLister)
			}
			if ctx.Err() != nil {
				return fmt.Errorf("list: gave up after --timeout %v (%d keys read; continue with --cursor %q): %w", f.timeout, out.Scanned, cursor, err)
			}
			return fmt.Errorf("list: %w", err)
		}
		now := time.Now()
		for _, key := range keys {
			if seen[key] {
				continue
			}
			seen[key] = true
			out.Scanned++
			st, err := b.Inspect(ctx, key)
			var row statusJSON
			switch {
			case err != nil && ctx.Err() != nil:
				// --timeout, not this key: what was read is not a listing.
				return fmt.Errorf("list: gave up after --timeout %v (%d keys read; continue with --cursor %q): %w", f.timeout, out.Scanned, cursor, err)
			case err != nil:
				// Its state is unknown, so it is listed whatever --state.
				row = unreadableStatus(key, err, now)
				out.Unreadable++
			case !st.Found:
				// Expired between List and Inspect, or deleted: not a record.
				continue
			case f.state != "" && st.State.String() != f.state:
				continue
			default:
				row = newStatus(st, now)
				if !row.RecordValid {
					out.Undecodable++
				}
			}
			row.addExpiry(ctx, store)
			if row.noExpiry() {
				out.NoExpiry++
			}
			out.Hosts = append(out.Hosts, row)
		}
		cursor = next
		if next == "" || !f.all {
			break
		}
	}
	if cursor != "" {
		out.NextCursor = strp(cursor)
	}
	out.OtherPrefixes = []prefixCount{}
	for _, p := range slices.Sorted(maps.Keys(other)) {
		out.OtherPrefixes = append(out.OtherPrefixes, prefixCount{p, other[p]})
	}
	empty := false
	if out.Scanned == 0 && f.cursor == "" {
		// Empty only if no page holds a key: a page can hold none and
		// not be the last (a store may leave tombstones out of a page).
		empty = cursor == ""
		if !empty {
			has, known, err := hasRecords(ctx, store, cursor)
			empty = err == nil && known && !has
		}
	}
	if f.format == "json" {
		if err := output.JSON(stdout, out); err != nil {
			return err
		}
	} else {
		out.writeTable(stdout)
		if cursor != "" {
			fmt.Fprintf(stderr, "more: continue with --cursor %q (or --all)\n", cursor)
		}
		if empty {
			fmt.Fprintf(stderr, "note: %s holds no record under prefix %q: is --prefix the one your fleet's Breakers use (kvbreaker.Prefixed)?\n", c.describe, f.bf.prefix)
		}
	}
	if len(out.OtherPrefixes) > 0 {
		var parts []string
		for _, p := range out.OtherPrefixes {
			parts = append(parts, fmt.Sprintf("%q (%d)", p.Prefix, p.Keys))
		}
		fmt.Fprintf(stderr, "note: keys of other fleets, under prefixes (not hosts, not listed): %s; list them with %s\n",
			strings.Join(parts, ", "), prefixFlag(out.OtherPrefixes[0].Prefix))
	}
	if out.NotBreakers > 0 {
		fmt.Fprintf(stderr, "note: %d key(s) under prefix %q have a '%%' that kvbreaker.Prefixed never writes: no Breaker's, not listed\n", out.NotBreakers, f.bf.prefix)
	}
	if out.NoExpiry > 0 {
		fmt.Fprintf(stderr, "warning: %d key(s) with expiry \"never\": %s\n", out.NoExpiry, noExpiryWarning)
	}
	if out.Unreadable > 0 {
		fmt.Fprintf(stderr, "Error: the store failed to read %d of the %d key(s) listed (state unknown, shown as unreadable with the reason)\n", out.Unreadable, out.Scanned)
		return &exitError{exitFail}
	}
	return nil
}

func (o listOutput) writeTable(w io.Writer) {
	fmt.Fprintf(w, "%-40s %-11s %8s  %-24s %-8s %-7s  %s\n", "HOST", "STATE", "FAILURES", "RESTRAINED UNTIL", "FOR", "PROBING", "EXPIRES IN")
	for _, h := range o.Hosts {
		host := shellWord(h.Host)
		switch {
		case h.Unreadable:
			fmt.Fprintf(w, "%-40s %-11s %8s  %-24s %-8s %-7s  %s\n", host, "unreadable", "-", "-", "-", "-", h.expiresText())
			fmt.Fprintf(w, "    read error: %s\n", *h.Message)
			continue
		case !h.RecordValid:
			fmt.Fprintf(w, "%-40s %-11s %8s  %-24s %-8s %-7s  %s\n", host, "undecodable", "-", "-", "-", "-", h.expiresText())
			fmt.Fprintf(w, "    decode error: %s (the breaker treats it as absent; its next write replaces it)\n", *h.Message)
			continue
		}
		until, left := "-", "-"
		if h.RestrainedUntil != nil {
			t, _ := time.Parse(time.RFC3339Nano, *h.RestrainedUntil)
			until = t.Format(time.RFC3339)
			left = fromMS(*h.RestrainedForMS).Round(time.Second).String()
		}
		probing := "no"
		if h.Probing {
			probing = "yes"
		}
		fmt.Fprintf(w, "%-40s %-11s %8d  %-24s %-8s %-7s  %s\n", host, h.State, h.FailureCount, until, left, probing, h.expiresText())
	}
	fmt.Fprintf(w, "%d host(s), %d key(s) read", len(o.Hosts), o.Scanned)
	if o.Unreadable > 0 {
		fmt.Fprintf(w, ", %d unreadable", o.Unreadable)
	}
	if o.Undecodable > 0 {
		fmt.Fprintf(w, ", %d undecodable", o.Undecodable)
	}
	if o.NoExpiry > 0 {
		fmt.Fprintf(w, ", %d without expiry", o.NoExpiry)
	}
	fmt.Fprintln(w)
}

// shellWord is key as list's table prints it: as it is when a shell takes
// it as one word, else in single quotes, so that what list prints can be
// pasted as inspect's or reset's HOST.
func shellWord(key string) string {
	plain := key != "" && key[0] != '-'
	for _, r := range key {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-:[]/@%+=,", r) || r >= 0x80) {
			plain = false
			break
		}
	}
	if plain {
		return key
	}
	if key != "" && key[0] == '-' {
		// A leading '-' reads as a flag even in quotes: HOST then goes after "--".
		return "-- '" + strings.ReplaceAll(key, "'", `'\''`) + "'"
	}
	return "'" + strings.ReplaceAll(key, "'", `'\''`) + "'"
}
