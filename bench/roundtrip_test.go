package bench

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/kvbreaker/kvbreaker"
)

// unchecked marks an expected count a test does not assert.
const unchecked = -1

// want is what one operation may cost: store calls (Get; CompareAndSwap or
// CompareAndDelete) and requests on the wire (reads; writes).
type want struct{ gets, writes, wireReads, wireWrites int64 }

// row is one measured operation.
type row struct {
	backend, op string
	calls, wire counts
	hasWire     bool
}

// TestRoundTrips measures, on every backend, the store calls and the
// requests on the wire that each decision costs, asserts these targets,
// and prints the table (go test -v):
//
//   - a closed-host Allow is 1 read and 0 writes;
//   - a Failure after an Allow, and every later uncontended one, is 1 write
//     round trip and no read on atomic stores (the version Allow read is
//     tried first);
//   - a Success on a host with no record writes nothing;
//   - a held re-check of an open host is 1 read with the cache off and
//     none with it on;
//   - at the restraint's end, the elected probe is a read and a write, and
//     a worker finding another's probe in flight reads and holds.
//
// On Workers KV it also checks that Miniflare served exactly the requests
// the transports counted; on NATS, that the publishes the dialer counted
// are the messages each connection says it sent, each answered by one.
//
// On a stale version (another worker wrote since), etcd's Txn Else branch
// returns the current record: 2 writes, no read. dynalite ignores
// ReturnValuesOnConditionCheckFailure=ALL_OLD, so there the adapter re-reads:
// 2 writes and 1 GetItem (real DynamoDB returns the item with the failed
// condition, as etcd does). MySQL's UPDATE answers only a row count, so
// there too a lost write is followed by a SELECT of the row, and NATS
// refuses a publish whose expected sequence is stale with an error only,
// so its adapter reads the key's last message for the conflict. SQLite has no
// network: its rows count the store calls only (each write is one
// BEGIN IMMEDIATE transaction in the calling process). Workers KV has no compare-and-swap, so Breaker
// keeps no write hints for it and reads before each write; its adapter's own
// read cache answers most of those reads without a request.
func TestRoundTrips(t *testing.T) {
	var (
		mu   sync.Mutex
		rows = map[string][]row{}
	)
	t.Run("backend", func(t *testing.T) {
		for _, name := range backends {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				r := roundTrips(t, name)
				mu.Lock()
				rows[name] = r
				mu.Unlock()
			})
		}
	})
	var all []row
	for _, name := range backends {
		all = append(all, rows[name]...)
	}
	t.Log("round trips per operation (store calls by Breaker; requests on the wire):\n" + formatRows(all))
}

func roundTrips(t *testing.T, name string) []row {
	r := newRig(t, name)
	ctx := t.Context()
	atomicStore := name != "cloudflarekv"
	if !atomicStore {
		// Miniflare counts the API requests it serves: check that the
		// transport counted every one (no other test uses it now).
		if err := cfSrv.ResetStats(ctx); err != nil {
			t.Fatal(err)
		}
		defer func() {
			st, err := cfSrv.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := r.wireTotal()
			if int64(st.Get) != got.Reads || int64(st.Put+st.Delete) != got.Writes || got.Other != 0 {
				t.Errorf("Miniflare served %d GET, %d PUT, %d DELETE; the transports counted %d reads, %d writes, %d other",
					st.Get, st.Put, st.Delete, got.Reads, got.Writes, got.Other)
			}
		}()
	}
	if name == "nats" {
		// The dialer parses what each connection writes; nats.go counts
		// the messages it publishes and receives: every publish must be
		// counted once, and (no subscriptions here) answered once.
		defer func() {
			for i, e := range r.opened {
				st, w := e.nats.Stats(), e.wire.load()
				if sent := uint64(w.Reads + w.Writes + w.Other); st.OutMsgs != sent || st.InMsgs != st.OutMsgs {
					t.Errorf("endpoint %d: the connection sent %d messages and received %d; the dialer counted %d (%+v)", i, st.OutMsgs, st.InMsgs, sent, w)
				}
			}
		}()
	}
	b, be := r.breaker(kvbreaker.Settings{})
	other, _ := r.breaker(kvbreaker.Settings{})
	opener, _ := r.breaker(kvbreaker.Settings{FailureThreshold: 1})
	cached, ce := r.breaker(kvbreaker.Settings{CacheSize: 100, CacheStaleness: time.Hour})
	// Warm the measured stores (etcd's lease pool grants once per TTL;
	// counted separately in TestRecordSizeAndLeases).
	for _, w := range []*kvbreaker.Breaker{b, cached} {
		if err := w.Failure(ctx, "warmup.example"); err != nil {
			t.Fatal(err)
		}
	}

	var rows []row
	measure := func(op string, e *endpoint, w want, f func() error) {
		t.Helper()
		before := e.snapshot()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		after := e.snapshot()
		got := row{backend: name, op: op, calls: after.calls.sub(before.calls), wire: after.wire.sub(before.wire), hasWire: e.wire != nil}
		rows = append(rows, got)
		check := func(what string, n, want int64) {
			if want != unchecked && n != want {
				t.Errorf("%s: %d %s, want %d", op, n, what, want)
			}
		}
		check("store reads", got.calls.Reads, w.gets)
		check("store writes", got.calls.Writes, w.writes)
		if got.hasWire {
			check("reads on the wire", got.wire.Reads, w.wireReads)
			check("writes on the wire", got.wire.Writes, w.wireWrites)
			check("other requests (lease grants)", got.wire.Other, 0)
		}
	}
	allow := func(br *kvbreaker.Breaker, host string, heldSince time.Time, want kvbreaker.Decision) (kvbreaker.Verdict, error) {
		v, err := br.Allow(ctx, host, heldSince)
		if err == nil && v.Decision != want {
			err = fmt.Errorf("Allow(%s) = %v, want %v", host, v.Decision, want)
		}
		return v, err
	}
	// pick returns the expectation for atomic stores or for Workers KV.
	pick := func(atomicWant, lwwWant want) want {
		if atomicStore {
			return atomicWant
		}
		return lwwWant
	}

	const closed = "closed.example"
	measure("allow, closed host", be, want{1, 0, 1, 0}, func() error {
		_, err := allow(b, closed, time.Time{}, kvbreaker.Send)
		return err
	})
	// Workers KV: Breaker reads before writing (no hints on a
	// last-writer-wins store); the adapter answers from its cache.
	measure("failure after allow (first)", be, pick(want{0, 1, 0, 1}, want{1, 1, 0, 1}), func() error {
		return b.Failure(ctx, closed)
	})
	measure("failure (subsequent)", be, pick(want{0, 1, 0, 1}, want{1, 1, 0, 1}), func() error {
		return b.Failure(ctx, closed)
	})
	if err := other.Failure(ctx, closed); err != nil {
		t.Fatal(err)
	}
	staleWant := want{0, 2, 0, 2}
	switch name {
	case "dynamodb":
		staleWant.wireReads = 1 // dynalite: no ALL_OLD, the adapter re-reads
	case "mysql":
		// An UPDATE answers only how many rows it changed: the adapter
		// reads the row for the conflict in a second statement.
		staleWant.wireReads = 1
	case "nats":
		// JetStream refuses the publish with an error, without the
		// key's last message: the adapter reads it for the conflict.
		staleWant.wireReads = 1
	case "cloudflarekv":
		// Last writer wins: the adapter serves its own last write from
		// its cache and this write overwrites the other worker's.
		staleWant = want{1, 1, unchecked, 1}
	}
	measure("failure, stale version (other worker wrote)", be, staleWant, func() error {
		return b.Failure(ctx, closed)
	})
	measure("success, record present", be, pick(want{0, 1, 0, 1}, want{1, 1, 0, 1}), func() error {
		return b.Success(ctx, closed)
	})
	measure("success, no record", be, want{1, 0, 1, 0}, func() error {
		return b.Success(ctx, "healthy.example")
	})
	if _, err := allow(b, "healthy2.example", time.Time{}, kvbreaker.Send); err != nil {
		t.Fatal(err)
	}
	// The absent version Allow saw is only a hint, so Success re-reads
	// rather than miss a circuit another worker opened meanwhile.
	measure("success after allow, no record, cache off", be, pick(want{1, 0, 1, 0}, want{1, 0, 0, 0}), func() error {
		return b.Success(ctx, "healthy2.example")
	})
	if _, err := allow(cached, "healthy2.example", time.Time{}, kvbreaker.Send); err != nil {
		t.Fatal(err)
	}
	// A cached record never decides a write: with the cache on too, the
	// "nothing to delete" Success confirms it with a read, so it closes a
	// circuit another worker opened since the cache was filled.
	measure("success after allow, no record, cache on", ce, pick(want{1, 0, 1, 0}, want{1, 0, 0, 0}), func() error {
		return cached.Success(ctx, "healthy2.example")
	})

	const dead = "dead.example"
	if err := opener.Failure(ctx, dead); err != nil {
		t.Fatal(err)
	}
	v, err := allow(b, dead, time.Time{}, kvbreaker.Hold)
	if err != nil {
		t.Fatal(err)
	}
	measure("held re-check, open host, cache off", be, pick(want{1, 0, 1, 0}, want{1, 0, 0, 0}), func() error {
		_, err := allow(b, dead, v.HeldSince, kvbreaker.Hold)
		return err
	})
	// A send decided before the opening fails now: ignored while open,
	// but the version Allow saw is only a hint, so Breaker re-reads.
	measure("failure, open host, after a held allow", be, pick(want{1, 0, 1, 0}, want{1, 0, 0, 0}), func() error {
		return b.Failure(ctx, dead)
	})
	if v, err = allow(cached, dead, time.Time{}, kvbreaker.Hold); err != nil {
		t.Fatal(err)
	}
	measure("held re-check, open host, cache on", ce, want{0, 0, 0, 0}, func() error {
		_, err := allow(cached, dead, v.HeldSince, kvbreaker.Hold)
		return err
	})

	// The restraint ends: the first re-check elects itself the probe
	// with a compare-and-swap; the next worker finds the probe in flight.
	r.advance(kvbreaker.Settings{}.WithDefaults().RecoveryDelay)
	measure("allow at restraint end, probe elected, cache off", be, pick(want{1, 1, 1, 1}, want{1, 1, 0, 1}), func() error {
		_, err := allow(b, dead, v.HeldSince, kvbreaker.Probe)
		return err
	})
	// Workers KV: the cached worker's adapter may still serve the open
	// record, and last writer wins, so it may probe too (documented).
	lateWant := pick(want{1, 0, 1, 0}, want{1, unchecked, unchecked, unchecked})
	measure("allow at restraint end, probe in flight, cache on", ce, lateWant, func() error {
		v, err := cached.Allow(ctx, dead, v.HeldSince)
		if err == nil && atomicStore && v.Decision != kvbreaker.Hold {
			err = fmt.Errorf("Allow = %v during another worker's probe, want hold", v.Decision)
		}
		return err
	})
	return rows
}

// formatRows renders rows as an aligned table.
func formatRows(rows []row) string {
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "backend\toperation\tstore get\tstore cas/cad\twire reads\twire writes\twire other")
	for _, r := range rows {
		wr, ww, wo := "-", "-", "-"
		if r.hasWire {
			wr, ww, wo = fmt.Sprint(r.wire.Reads), fmt.Sprint(r.wire.Writes), fmt.Sprint(r.wire.Other)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", r.backend, r.op, r.calls.Reads, r.calls.Writes, wr, ww, wo)
	}
	tw.Flush()
	return sb.String()
}
