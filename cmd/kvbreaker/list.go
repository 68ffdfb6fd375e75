package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
)

const listLong = `Lists the hosts that have a record under --prefix, with their state, the
failures that still count, until when deliveries are restrained and whether a
probe is in flight: which hosts are open right now.

It reads one page of at most --limit keys per run and prints the cursor of the
next page (--cursor continues from it); --all reads every page, within
--timeout. --state keeps only the hosts in that state (the page is still
--limit keys read, so a filtered page may show fewer hosts). It needs a store
that can list its keys (driver.Lister: etcd, DynamoDB, Workers KV, memory);
for another store it says so and exits 1. It only reads.

` + backendFlagsHelp

const listExample = `  kvbreaker list --backend etcd --etcd-endpoints http://127.0.0.1:2379 --state open
  kvbreaker list --backend dynamodb --dynamodb-table kvbreaker --all --format json
  kvbreaker list --backend etcd --etcd-endpoints http://127.0.0.1:2379 --cursor mastodon.example`

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
		Example: listExample,
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
	for {
		keys, next, err := listPage(ctx, store, cursor, f.limit)
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
			out.Scanned++
			st, err := b.Inspect(ctx, key)
			if err != nil {
				return fmt.Errorf("list: %w", err)
			}
			// Expired between List and Inspect, or deleted: not a record.
			if !st.Found {
				continue
			}
			if f.state != "" && st.State.String() != f.state {
				continue
			}
			out.Hosts = append(out.Hosts, newStatus(st, now))
		}
		cursor = next
		if next == "" || !f.all {
			break
		}
	}
	if cursor != "" {
		out.NextCursor = strp(cursor)
	}
	if f.format == "json" {
		return writeJSON(stdout, out)
	}
	out.writeTable(stdout)
	if cursor != "" {
		fmt.Fprintf(stderr, "more: continue with --cursor %q (or --all)\n", cursor)
	}
	if out.Scanned == 0 && f.cursor == "" {
		fmt.Fprintf(stderr, "note: %s holds no record under prefix %q: is --prefix the one your fleet's Breakers use (kvbreaker.Prefixed)?\n", c.describe, f.bf.prefix)
	}
	return nil
}

func (o listOutput) writeTable(w io.Writer) {
	fmt.Fprintf(w, "%-40s %-9s %8s  %-24s %-8s %s\n", "HOST", "STATE", "FAILURES", "RESTRAINED UNTIL", "FOR", "PROBING")
	for _, h := range o.Hosts {
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
		fmt.Fprintf(w, "%-40s %-9s %8d  %-24s %-8s %s\n", h.Host, h.State, h.FailureCount, until, left, probing)
	}
	fmt.Fprintf(w, "%d host(s), %d key(s) read\n", len(o.Hosts), o.Scanned)
}
