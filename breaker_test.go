package kvbreaker_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

const host = "inbox.example"

type transition struct {
	host     string
	from, to kvbreaker.State
}

// recorder collects OnStateChange calls from any number of Breakers.
type recorder struct {
	mu  sync.Mutex
	got []transition
}

func (r *recorder) on(host string, from, to kvbreaker.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, transition{host, from, to})
}

func (r *recorder) count(from, to kvbreaker.State) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, t := range r.got {
		if t.from == from && t.to == to {
			n++
		}
	}
	return n
}

func newBreaker(t *testing.T, store driver.Store, s kvbreaker.Settings) *kvbreaker.Breaker {
	t.Helper()
	b, err := kvbreaker.New(store, s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustAllow(t *testing.T, b *kvbreaker.Breaker, heldSince time.Time) kvbreaker.Verdict {
	t.Helper()
	v, err := b.Allow(t.Context(), host, heldSince)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestBreakerLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		b := newBreaker(t, memory.New(), kvbreaker.Settings{OnStateChange: rec.on})
		ctx := t.Context()
		for range 4 {
			if err := b.Failure(ctx, host); err != nil {
				t.Fatal(err)
			}
			if v := mustAllow(t, b, time.Time{}); v.Decision != kvbreaker.Send {
				t.Fatalf("below threshold: %v", v.Decision)
			}
		}
		if err := b.Failure(ctx, host); err != nil {
			t.Fatal(err)
		}
		opened := time.Now()
		v := mustAllow(t, b, time.Time{})
		if v.Decision != kvbreaker.Hold || !v.RetryAt.Equal(opened.Add(30*time.Minute)) || !v.HeldSince.Equal(opened) {
			t.Fatalf("open: %+v", v)
		}
		// Failures while open change nothing.
		if err := b.Failure(ctx, host); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(v.RetryAt))
		if p := mustAllow(t, b, v.HeldSince); p.Decision != kvbreaker.Probe {
			t.Fatalf("after recovery delay: %v", p.Decision)
		}
		h := mustAllow(t, b, v.HeldSince)
		if h.Decision != kvbreaker.Hold || !h.RetryAt.Equal(time.Now().Add(time.Second)) {
			t.Fatalf("during probe: %+v, want hold for the release interval", h)
		}
		if err := b.Success(ctx, host); err != nil {
			t.Fatal(err)
		}
		if s := mustAllow(t, b, h.HeldSince); s.Decision != kvbreaker.Send {
			t.Fatalf("after success: %v", s.Decision)
		}
		want := []transition{{host, kvbreaker.StateClosed, kvbreaker.StateOpen}, {host, kvbreaker.StateOpen, kvbreaker.StateHalfOpen}, {host, kvbreaker.StateHalfOpen, kvbreaker.StateClosed}}
		if len(rec.got) != len(want) {
			t.Fatalf("transitions %v, want %v", rec.got, want)
		}
		for i := range want {
			if rec.got[i] != want[i] {
				t.Fatalf("transitions %v, want %v", rec.got, want)
			}
		}
	})
}

func TestBreakerFailedProbeReopens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		b := newBreaker(t, memory.New(), kvbreaker.Settings{OnStateChange: rec.on, FailureThreshold: 1})
		ctx := t.Context()
		b.Failure(ctx, host)
		time.Sleep(30 * time.Minute)
		if v := mustAllow(t, b, time.Time{}); v.Decision != kvbreaker.Probe {
			t.Fatalf("%v", v.Decision)
		}
		b.Failure(ctx, host)
		if v := mustAllow(t, b, time.Time{}); v.Decision != kvbreaker.Hold || !v.RetryAt.Equal(time.Now().Add(30*time.Minute)) {
			t.Fatalf("after failed probe: %+v", v)
		}
		if rec.count(kvbreaker.StateHalfOpen, kvbreaker.StateOpen) != 1 {
			t.Fatalf("transitions %v", rec.got)
		}
	})
}

func TestBreakerStaleProbeTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		b := newBreaker(t, memory.New(), kvbreaker.Settings{OnStateChange: rec.on, FailureThreshold: 1})
		b.Failure(t.Context(), host)
		time.Sleep(30 * time.Minute)
		mustAllow(t, b, time.Time{}) // the probe whose worker dies
		time.Sleep(30*time.Minute - time.Millisecond)
		if v := mustAllow(t, b, time.Time{}); v.Decision != kvbreaker.Hold {
			t.Fatalf("before takeover: %v", v.Decision)
		}
		time.Sleep(time.Millisecond)
		if v := mustAllow(t, b, time.Time{}); v.Decision != kvbreaker.Probe {
			t.Fatalf("stale probe not taken over: %v", v.Decision)
		}
		if n := rec.count(kvbreaker.StateOpen, kvbreaker.StateHalfOpen); n != 1 || len(rec.got) != 2 {
			t.Fatalf("takeover must not report a transition: %v", rec.got)
		}
	})
}

func TestBreakerDropsAtHoldLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var dropped []time.Time
		store := &countingStore{Store: memory.New()}
		b := newBreaker(t, store, kvbreaker.Settings{
			FailureThreshold: 1, HoldLimit: time.Hour, RecoveryDelay: 2 * time.Hour,
			OnDrop: func(h string, since time.Time) { dropped = append(dropped, since) },
		})
		b.Failure(t.Context(), host)
		v := mustAllow(t, b, time.Time{})
		if !v.RetryAt.Equal(v.HeldSince.Add(time.Hour)) {
			t.Fatalf("retry %v not capped at the hold limit %v", v.RetryAt, v.HeldSince.Add(time.Hour))
		}
		time.Sleep(time.Until(v.RetryAt))
		gets := store.gets.Load()
		d := mustAllow(t, b, v.HeldSince)
		if d.Decision != kvbreaker.Drop || len(dropped) != 1 || !dropped[0].Equal(v.HeldSince) {
			t.Fatalf("at the hold limit: %v, OnDrop calls %v", d.Decision, dropped)
		}
		if store.gets.Load() != gets {
			t.Fatal("a drop read the store")
		}
	})
}

// TestFleetOpensOnce: 64 workers, each with its own Breaker over one store,
// fail on one host at once. Exactly one of them reports closed→open; after
// the recovery delay, 64 concurrent Allows elect exactly one probe.
func TestFleetOpensOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wrap  func(driver.Store) driver.Store
		extra string
	}{
		{name: "conflict-carries-value"},
		{name: "conflict-needs-reread", wrap: func(s driver.Store) driver.Store { return plainConflicts{s} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const workers = 64
				var store driver.Store = memory.New()
				if tc.wrap != nil {
					store = tc.wrap(store)
				}
				rec := &recorder{}
				fleet := make([]*kvbreaker.Breaker, workers)
				for i := range fleet {
					fleet[i] = newBreaker(t, store, kvbreaker.Settings{OnStateChange: rec.on})
				}
				var wg sync.WaitGroup
				for _, b := range fleet {
					wg.Go(func() {
						for range 3 {
							if err := b.Failure(t.Context(), host); err != nil {
								t.Error(err)
							}
						}
					})
				}
				wg.Wait()
				if n := rec.count(kvbreaker.StateClosed, kvbreaker.StateOpen); n != 1 {
					t.Fatalf("%d closed→open transitions, want 1: %v", n, rec.got)
				}
				time.Sleep(30 * time.Minute)
				var probes, holds atomic.Int32
				for _, b := range fleet {
					wg.Go(func() {
						v, err := b.Allow(t.Context(), host, time.Time{})
						if err != nil {
							t.Error(err)
						}
						switch v.Decision {
						case kvbreaker.Probe:
							probes.Add(1)
						case kvbreaker.Hold:
							holds.Add(1)
						}
					})
				}
				wg.Wait()
				if probes.Load() != 1 || holds.Load() != workers-1 {
					t.Fatalf("%d probes and %d holds, want 1 and %d", probes.Load(), holds.Load(), workers-1)
				}
				if n := rec.count(kvbreaker.StateOpen, kvbreaker.StateHalfOpen); n != 1 {
					t.Fatalf("%d open→half-open transitions, want 1", n)
				}
			})
		})
	}
}

func TestBreakerFailsOpen(t *testing.T) {
	down := errors.New("connection refused")
	for _, failClosed := range []bool{false, true} {
		name := map[bool]string{false: "fail-open", true: "fail-closed"}[failClosed]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBreaker(t, brokenStore{down}, kvbreaker.Settings{FailClosed: failClosed})
				v, err := b.Allow(t.Context(), host, time.Time{})
				if !errors.Is(err, down) {
					t.Fatalf("store error not returned: %v", err)
				}
				want := map[bool]kvbreaker.Decision{false: kvbreaker.Send, true: kvbreaker.Hold}[failClosed]
				if v.Decision != want {
					t.Fatalf("decision %v, want %v", v.Decision, want)
				}
				if failClosed && !v.RetryAt.Equal(time.Now().Add(time.Second)) {
					t.Fatalf("fail-closed retry %v", v.RetryAt)
				}
				if err := b.Failure(t.Context(), host); !errors.Is(err, down) {
					t.Fatalf("Failure: %v", err)
				}
			})
		})
	}
}

// TestBreakerSlowStore: a store that never answers costs a caller without a
// deadline CallTimeout, not forever.
func TestBreakerSlowStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker(t, hangingStore{}, kvbreaker.Settings{CallTimeout: 2 * time.Second})
		start := time.Now()
		v, err := b.Allow(context.Background(), host, time.Time{})
		if !errors.Is(err, context.DeadlineExceeded) || v.Decision != kvbreaker.Send {
			t.Fatalf("got %v, %v", v.Decision, err)
		}
		if took := time.Since(start); took != 2*time.Second {
			t.Fatalf("took %v, want the 2s CallTimeout", took)
		}
	})
}

func TestBreakerCorruptRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var logs bytes.Buffer
		b := newBreaker(t, store, kvbreaker.Settings{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		ctx := t.Context()
		if _, err := store.CompareAndSwap(ctx, host, driver.NoVersion, []byte{1, 0, 0xc0, 0x84, 0x3d}, time.Hour); err != nil {
			t.Fatal(err)
		}
		if v := mustAllow(t, b, time.Time{}); v.Decision != kvbreaker.Send {
			t.Fatalf("corrupt record: %v", v.Decision)
		}
		st, err := b.Inspect(ctx, host)
		if err != nil || !st.Found || !errors.Is(st.Err, record.ErrCorruptRecord) {
			t.Fatalf("inspect: %+v %v", st, err)
		}
		if err := b.Failure(ctx, host); err != nil {
			t.Fatal(err)
		}
		st, _ = b.Inspect(ctx, host)
		if st.Err != nil || len(st.Failures) != 1 {
			t.Fatalf("not overwritten: %+v", st)
		}
		if !strings.Contains(logs.String(), "undecodable record") {
			t.Fatalf("no warning logged: %q", logs.String())
		}
	})
}

func TestBreakerRejectsHostileHosts(t *testing.T) {
	store := &countingStore{Store: memory.New()}
	b := newBreaker(t, store, kvbreaker.Settings{})
	for _, h := range []string{"", strings.Repeat("a", driver.MaxKeyLen+1), "a\x00b", "bad\xffutf8", "new\nline"} {
		if _, err := b.Allow(t.Context(), h, time.Time{}); !errors.Is(err, driver.ErrInvalidKey) {
			t.Errorf("Allow(%q): %v", h, err)
		}
		if err := b.Failure(t.Context(), h); !errors.Is(err, driver.ErrInvalidKey) {
			t.Errorf("Failure(%q): %v", h, err)
		}
	}
	if store.gets.Load() != 0 {
		t.Fatal("invalid keys reached the store")
	}
}

func TestBreakerLastWriterWinsWarnsOnce(t *testing.T) {
	var logs bytes.Buffer
	lww := lwwStore{memory.New()}
	b := newBreaker(t, lww, kvbreaker.Settings{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for range 3 {
		b.Failure(t.Context(), host)
	}
	if n := strings.Count(logs.String(), "last-writer-wins"); n != 1 {
		t.Fatalf("warned %d times: %q", n, logs.String())
	}
}

func TestBreakerReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		b := newBreaker(t, memory.New(), kvbreaker.Settings{FailureThreshold: 1, OnStateChange: rec.on})
		b.Failure(t.Context(), host)
		if err := b.Reset(t.Context(), host); err != nil {
			t.Fatal(err)
		}
		if err := b.Reset(t.Context(), host); err != nil {
			t.Fatalf("reset of an absent host: %v", err)
		}
		if v := mustAllow(t, b, time.Time{}); v.Decision != kvbreaker.Send || rec.count(kvbreaker.StateOpen, kvbreaker.StateClosed) != 1 {
			t.Fatalf("after reset: %v, %v", v.Decision, rec.got)
		}
	})
}

func TestDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker(t, memory.New(), kvbreaker.Settings{FailureThreshold: 2})
		ctx := t.Context()
		boom := errors.New("503")
		ran := 0
		fail := func(context.Context) error { ran++; return boom }
		if err := b.Do(ctx, host, func(context.Context) error { ran++; return kvbreaker.Reachable(errors.New("404")) }); err == nil || kvbreaker.Classify(ctx, err) != kvbreaker.ReachableFailure {
			t.Fatalf("reachable: %v", err)
		}
		b.Do(ctx, host, fail)
		if st, _ := b.Inspect(ctx, host); len(st.Failures) != 1 {
			t.Fatalf("failure not recorded: %+v", st)
		}
		if err := b.Do(ctx, host, fail); !errors.Is(err, boom) {
			t.Fatalf("fn error not returned: %v", err)
		}
		err := b.Do(ctx, host, fail)
		if !errors.Is(err, kvbreaker.ErrHeld) || ran != 3 {
			t.Fatalf("open circuit: err %v, fn ran %d times", err, ran)
		}
		held, _ := errors.AsType[*kvbreaker.HeldError](err)
		if !held.RetryAt.Equal(time.Now().Add(30 * time.Minute)) {
			t.Fatalf("held until %v", held.RetryAt)
		}
		time.Sleep(30 * time.Minute)
		if err := b.Do(ctx, host, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if st, _ := b.Inspect(ctx, host); st.Found {
			t.Fatalf("success did not close: %+v", st)
		}
		// A caller's cancellation is not the host's failure.
		cctx, cancel := context.WithCancel(ctx)
		b.Do(cctx, host, func(context.Context) error { cancel(); return context.Canceled })
		if st, _ := b.Inspect(ctx, host); st.Found {
			t.Fatalf("cancellation counted as a failure: %+v", st)
		}
	})
}

type countingStore struct {
	driver.Store
	gets, writes atomic.Int64
}

func (s *countingStore) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	s.writes.Add(1)
	return s.Store.CompareAndSwap(ctx, key, old, value, ttl)
}

func (s *countingStore) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	s.writes.Add(1)
	return s.Store.CompareAndDelete(ctx, key, old)
}

func (s *countingStore) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, key)
}

// plainConflicts hides the current value a conflict carries, as a store
// without that ability would.
type plainConflicts struct{ driver.Store }

func (s plainConflicts) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	v, err := s.Store.CompareAndSwap(ctx, key, old, value, ttl)
	if errors.Is(err, driver.ErrConflict) {
		err = driver.ErrConflict
	}
	return v, err
}

type brokenStore struct{ err error }

func (s brokenStore) Get(context.Context, string) ([]byte, driver.Version, error) {
	return nil, 0, s.err
}
func (s brokenStore) CompareAndSwap(context.Context, string, driver.Version, []byte, time.Duration) (driver.Version, error) {
	return 0, s.err
}
func (s brokenStore) CompareAndDelete(context.Context, string, driver.Version) error { return s.err }
func (s brokenStore) Traits() driver.Traits                                          { return driver.Traits{Atomic: true} }

type hangingStore struct{ brokenStore }

func (hangingStore) Get(ctx context.Context, _ string) ([]byte, driver.Version, error) {
	<-ctx.Done()
	return nil, 0, ctx.Err()
}

type lwwStore struct{ *memory.Store }

func (s lwwStore) Traits() driver.Traits { t := s.Store.Traits(); t.Atomic = false; return t }
