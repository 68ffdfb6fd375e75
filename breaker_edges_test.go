package kvbreaker_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
)

// The tests in this file kill mutants of the root package (go run
// ./tools/mutants -pkg .) that its other tests let live.

// TestNewNilStore: New without a store is an error, not a crash on
// store.Traits().
func TestNewNilStore(t *testing.T) {
	b, err := kvbreaker.New(nil, kvbreaker.Settings{})
	if err == nil || b != nil {
		t.Fatalf("New(nil) = %v, %v; want an error", b, err)
	}
}

// TestClockCheckIntervalWithSkip: a ClockCheckInterval together with
// SkipClockCheck contradicts itself; New refuses it naming both fields.
func TestClockCheckIntervalWithSkip(t *testing.T) {
	_, err := kvbreaker.New(memory.New(), kvbreaker.Settings{ClockCheckInterval: 1, SkipClockCheck: true})
	if err == nil || !strings.Contains(err.Error(), "ClockCheckInterval") || !strings.Contains(err.Error(), "SkipClockCheck") {
		t.Fatalf("New with ClockCheckInterval 1ns and SkipClockCheck = %v; want an error naming both", err)
	}
}

// closingStore is a memory store that queues no writes but reports what
// Flush and Close were asked, failing them with the errors set.
type closingStore struct {
	driver.Store
	flushes, closes    atomic.Int32
	flushErr, closeErr error
}

func (s *closingStore) Flush(context.Context) error { s.flushes.Add(1); return s.flushErr }
func (s *closingStore) Close() error                { s.closes.Add(1); return s.closeErr }

// TestCloseReportsStoreErrors: Breaker.Close flushes and closes its store,
// and returns both errors (before: a dropped Close error went unnoticed).
func TestCloseReportsStoreErrors(t *testing.T) {
	errFlush, errClose := errors.New("flush failed"), errors.New("close failed")
	s := &closingStore{Store: memory.New(), flushErr: errFlush, closeErr: errClose}
	b := newBreaker(t, s, kvbreaker.Settings{SkipClockCheck: true})
	err := b.Close(t.Context())
	if !errors.Is(err, errFlush) || !errors.Is(err, errClose) {
		t.Fatalf("Close = %v; want both the flush and the close error", err)
	}
	if s.flushes.Load() != 1 || s.closes.Load() != 1 {
		t.Fatalf("Close flushed %d and closed %d times; want once each", s.flushes.Load(), s.closes.Load())
	}
}

// prefixed wraps s with the first of a few prefixes Prefixed accepts.
func prefixed(t *testing.T, s driver.Store) driver.Store {
	t.Helper()
	var errs []error
	for _, p := range []string{"fleet/", "fleet:", "fleet"} {
		ps, err := kvbreaker.Prefixed(s, p)
		if err == nil {
			return ps
		}
		errs = append(errs, err)
	}
	t.Fatalf("Prefixed refused every prefix tried: %v", errors.Join(errs...))
	return nil
}

// TestPrefixedFlushReachesStore: a Breaker over Prefixed(store) flushes
// and closes the store underneath, so a store that queues writes loses
// none at Close.
func TestPrefixedFlushReachesStore(t *testing.T) {
	errClose := errors.New("close failed")
	s := &closingStore{Store: memory.New(), closeErr: errClose}
	ps := prefixed(t, s)
	f, ok := ps.(driver.Flusher)
	if !ok {
		t.Fatalf("%T is no driver.Flusher", ps)
	}
	if err := f.Flush(t.Context()); err != nil || s.flushes.Load() != 1 {
		t.Fatalf("Prefixed(...).Flush = %v, with %d flushes of the store; want 1", err, s.flushes.Load())
	}
	b := newBreaker(t, ps, kvbreaker.Settings{SkipClockCheck: true})
	if err := b.Close(t.Context()); !errors.Is(err, errClose) {
		t.Fatalf("Close over Prefixed = %v; want the store's close error", err)
	}
	if s.flushes.Load() != 2 || s.closes.Load() != 1 {
		t.Fatalf("Close over Prefixed: %d flushes, %d closes of the store; want 2, 1", s.flushes.Load(), s.closes.Load())
	}
}

// TestDoReachableClosesCircuit: Do with a Reachable error on a host with a
// failure recorded reports a ReachableFailure, which closes the circuit
// (deletes the record), rather than a second failure, which would open it.
func TestDoReachableClosesCircuit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker(t, memory.New(), kvbreaker.Settings{FailureThreshold: 2, SkipClockCheck: true})
		ctx := t.Context()
		if err := b.Failure(ctx, host); err != nil {
			t.Fatal(err)
		}
		rejected := errors.New("422 rejected")
		err := b.Do(ctx, host, func(context.Context) error { return kvbreaker.Reachable(rejected) })
		if !errors.Is(err, rejected) {
			t.Fatalf("Do = %v, want fn's error", err)
		}
		st, err := b.Inspect(ctx, host)
		if err != nil {
			t.Fatal(err)
		}
		if st.Found || st.State != kvbreaker.StateClosed {
			t.Fatalf("after a reachable failure: %+v; want the record deleted and the circuit closed", st)
		}
		if v := mustAllow(t, b, time.Time{}); v.Decision != kvbreaker.Send {
			t.Fatalf("Allow after a reachable failure = %v, want Send", v.Decision)
		}
	})
}

// TestCacheAbsentAfterOwnDelete: after its own Success or Reset deleted the
// record, a Breaker knows the host is absent and answers the next Allow
// from its decision cache, without a store read.
func TestCacheAbsentAfterOwnDelete(t *testing.T) {
	for _, op := range []string{"Success", "Reset"} {
		t.Run(op, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := &countingStore{Store: memory.New()}
				b := newBreaker(t, store, kvbreaker.Settings{CacheSize: 100, SkipClockCheck: true})
				ctx := t.Context()
				if err := b.Failure(ctx, host); err != nil {
					t.Fatal(err)
				}
				del := b.Success
				if op == "Reset" {
					del = b.Reset
				}
				if err := del(ctx, host); err != nil {
					t.Fatal(err)
				}
				g := store.gets.Load()
				if v := mustAllow(t, b, time.Time{}); v.Decision != kvbreaker.Send {
					t.Fatalf("Allow = %v, want Send", v.Decision)
				}
				if n := store.gets.Load() - g; n != 0 {
					t.Fatalf("Allow right after %s read the store %d times; want 0 (the cache knows the record is gone)", op, n)
				}
			})
		})
	}
}
