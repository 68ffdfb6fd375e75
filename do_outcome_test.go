package kvbreaker_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
)

// openHost opens host's circuit on b with threshold failures.
func openHost(t *testing.T, b *kvbreaker.Breaker, threshold int) {
	t.Helper()
	for range threshold {
		if err := b.Failure(t.Context(), host); err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := b.Inspect(t.Context(), host); st.State != kvbreaker.StateOpen {
		t.Fatalf("after %d failures: %v, want open", threshold, st.State)
	}
}

// TestDoHeldSinceDrops: a held-since instant in the context is passed to
// Allow, so a message held for HoldLimit is dropped, fn is not run, and the
// error matches ErrDropped and not ErrHeld (a caller retrying held messages
// must not retry it).
func TestDoHeldSinceDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker(t, memory.New(), kvbreaker.Settings{FailureThreshold: 2})
		openHost(t, b, 2)
		ran := 0
		fn := func(context.Context) error { ran++; return nil }
		err := b.Do(t.Context(), host, fn)
		held, ok := errors.AsType[*kvbreaker.HeldError](err)
		if !ok || !errors.Is(err, kvbreaker.ErrHeld) || errors.Is(err, kvbreaker.ErrDropped) || !held.HeldSince.Equal(time.Now()) {
			t.Fatalf("first ask: %v (%+v), want held since now", err, held)
		}
		time.Sleep(defaults.HoldLimit)
		ctx := kvbreaker.WithHeldSince(t.Context(), held.HeldSince)
		err = b.Do(ctx, host, fn)
		dropped, ok := errors.AsType[*kvbreaker.HeldError](err)
		if !ok || !errors.Is(err, kvbreaker.ErrDropped) || errors.Is(err, kvbreaker.ErrHeld) || ran != 0 {
			t.Fatalf("at the hold limit: %v, fn ran %d times; want ErrDropped without running fn", err, ran)
		}
		if dropped.Decision != kvbreaker.Drop || !dropped.HeldSince.Equal(held.HeldSince) {
			t.Fatalf("dropped: %+v, want Drop since %v", dropped, held.HeldSince)
		}
		// Control: the same call without the instant is a fresh message:
		// the restraint has ended, so it goes out as the probe.
		if err := b.Do(t.Context(), host, fn); err != nil || ran != 1 {
			t.Fatalf("fresh message: %v, fn ran %d times; want it run once", err, ran)
		}
	})
}

// TestDoDeadlineIsFailure: fn timing out on ctx's deadline is charged to the
// host, as httpbreaker charges a timed-out request: a black-holed host
// shows itself only as timeouts, and must be able to open the circuit.
func TestDoDeadlineIsFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker(t, memory.New(), kvbreaker.Settings{FailureThreshold: 2})
		blackHole := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
		for i := range 2 {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			err := b.Do(ctx, host, blackHole)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("try %d: %v, want the deadline", i, err)
			}
		}
		if st, _ := b.Inspect(t.Context(), host); st.State != kvbreaker.StateOpen {
			t.Fatalf("after 2 timeouts: %+v, want open", st)
		}
	})
}

// TestDoCancelledWithCauseIgnored: a cancellation is the caller's, whatever
// its cause (a sibling's failure in an errgroup, a signal): not charged.
func TestDoCancelledWithCauseIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker(t, memory.New(), kvbreaker.Settings{FailureThreshold: 1})
		ctx, cancel := context.WithCancelCause(t.Context())
		sibling := errors.New("sibling delivery failed")
		err := b.Do(ctx, host, func(ctx context.Context) error { cancel(sibling); return context.Cause(ctx) })
		if !errors.Is(err, sibling) {
			t.Fatalf("err = %v, want the cause", err)
		}
		if st, _ := b.Inspect(t.Context(), host); st.Found {
			t.Fatalf("a cancelled delivery was charged: %+v", st)
		}
	})
}

// TestDoCancelledProbeReleasesClaim: a probe whose caller gives up says
// nothing about the host; Do releases its claim, so another worker probes
// at once instead of holding for RecoveryDelay.
func TestDoCancelledProbeReleasesClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		s := kvbreaker.Settings{FailureThreshold: 2}
		w1, w2 := newBreaker(t, store, s), newBreaker(t, store, s)
		openHost(t, w1, 2)
		time.Sleep(defaults.RecoveryDelay)
		ctx, cancel := context.WithCancel(t.Context())
		probed := false
		err := w1.Do(ctx, host, func(ctx context.Context) error {
			probed = true
			// Worker 2 asks while the probe is in flight: held.
			if v, _ := w2.Allow(t.Context(), host, time.Time{}); v.Decision != kvbreaker.Hold {
				t.Errorf("during the probe: %v, want hold", v.Decision)
			}
			cancel() // shutdown
			return ctx.Err()
		})
		if !probed || !errors.Is(err, context.Canceled) {
			t.Fatalf("probe ran %v, err %v", probed, err)
		}
		st, _ := w1.Inspect(t.Context(), host)
		if st.Probing || !st.RestrainedUntil.Equal(time.Now()) || len(st.Failures) != 2 {
			t.Fatalf("after the cancelled probe: %+v, want open, restraint ending now, failures kept", st)
		}
		if v, err := w2.Allow(t.Context(), host, time.Time{}); err != nil || v.Decision != kvbreaker.Probe {
			t.Fatalf("next worker: %v, %v; want probe at once", v.Decision, err)
		}
	})
}

// TestAbandonStale: Abandon writes only while the record is still its own
// claim.
func TestAbandonStale(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, w2 *kvbreaker.Breaker)
	}{
		{"taken-over", func(t *testing.T, w2 *kvbreaker.Breaker) {
			time.Sleep(defaults.RecoveryDelay) // the claim went unanswered
			if v, _ := w2.Allow(t.Context(), host, time.Time{}); v.Decision != kvbreaker.Probe {
				t.Fatalf("takeover: %v, want probe", v.Decision)
			}
		}},
		{"probe-failed", func(t *testing.T, w2 *kvbreaker.Breaker) {
			if err := w2.Failure(t.Context(), host); err != nil {
				t.Fatal(err)
			}
		}},
		{"closed", func(t *testing.T, w2 *kvbreaker.Breaker) {
			if err := w2.Success(t.Context(), host); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := memory.New()
				s := kvbreaker.Settings{FailureThreshold: 2}
				w1, w2 := newBreaker(t, store, s), newBreaker(t, store, s)
				openHost(t, w1, 2)
				time.Sleep(defaults.RecoveryDelay)
				v := mustAllow(t, w1, time.Time{})
				if v.Decision != kvbreaker.Probe {
					t.Fatalf("%v, want probe", v.Decision)
				}
				time.Sleep(time.Second)
				tc.change(t, w2)
				before, _ := w1.Inspect(t.Context(), host)
				if err := w1.Abandon(t.Context(), host, v); err != nil {
					t.Fatal(err)
				}
				// The store versions each write: an unchanged version
				// means nothing was written (w1's compare-and-swap on its
				// cached claim may be tried, and is refused).
				after, _ := w1.Inspect(t.Context(), host)
				if after.Version != before.Version || after.Found != before.Found {
					t.Fatalf("stale Abandon wrote: %+v → %+v", before, after)
				}
			})
		})
	}
	t.Run("not-a-probe", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := &countingStore{Store: memory.New()}
			b := newBreaker(t, store, kvbreaker.Settings{FailureThreshold: 2})
			openHost(t, b, 2)
			v := mustAllow(t, b, time.Time{})
			writes, gets := store.writes.Load(), store.gets.Load()
			if err := b.Abandon(t.Context(), host, v); err != nil || store.writes.Load() != writes || store.gets.Load() != gets {
				t.Fatalf("Abandon of a %v: %v, %d writes, %d gets; want no store call", v.Decision, err, store.writes.Load()-writes, store.gets.Load()-gets)
			}
		})
	})
}
