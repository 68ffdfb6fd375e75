package kvbreaker_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
)

// The tests in this file kill mutants of breaker.go and cache.go (go run
// ./tools/mutants -pkg .) that the other tests let live.

// TestFailureWithoutReadStampsCallStart: a Failure decided without a
// store read (on an atomic store, the guess that the record is absent)
// is stamped with the instant the call read at its start; only a write
// decided on a record read from the store reads the clock again.
func TestFailureWithoutReadStampsCallStart(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	reads := 0
	clock := func() time.Time { // t0, then 10 ms later at each read
		reads++
		return t0.Add(time.Duration(reads-1) * 10 * time.Millisecond)
	}
	b := newBreaker(t, memory.New(), kvbreaker.Settings{FailureThreshold: 10, Clock: clock, SkipClockCheck: true})
	if err := b.Failure(t.Context(), host); err != nil {
		t.Fatal(err)
	}
	if reads != 1 {
		t.Fatalf("a Failure on an absent host read the clock %d times; want once", reads)
	}
	st, err := b.Inspect(t.Context(), host)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Failures) != 1 || !st.Failures[0].Equal(t0) {
		t.Fatalf("stored failures %v; want [%v]", st.Failures, t0)
	}
}

// TestCacheStalenessOneNanosecond: the smallest CacheStaleness still
// caches: an entry decides until exactly 1 ns after it was read (by the
// monotonic clock, whatever Settings.Clock says), and a re-read of the
// same record decides for another 1 ns.
func TestCacheStalenessOneNanosecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		frozen := time.Now()
		store := &countingStore{Store: memory.New()}
		b := newBreaker(t, store, kvbreaker.Settings{CacheSize: 100, CacheStaleness: time.Nanosecond, Clock: func() time.Time { return frozen }})
		for i, want := range []int64{1, 1, -1, 2, 2} {
			if want < 0 {
				time.Sleep(time.Nanosecond)
				continue
			}
			if v := mustAllow(t, b, time.Time{}); v.Decision != kvbreaker.Send {
				t.Fatalf("Allow = %v, want Send", v.Decision)
			}
			if n := store.gets.Load(); n != want {
				t.Fatalf("after step %d: %d store reads, want %d", i, n, want)
			}
		}
	})
}

// TestFailClosedHoldsNoLongerThanHoldLimit: with the store down and
// FailClosed, a message is held for ReleaseInterval, but never past the
// instant HoldLimit drops it.
func TestFailClosedHoldsNoLongerThanHoldLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const holdLimit, release = time.Hour, 10 * time.Second
		b := newBreaker(t, brokenStore{errors.New("down")}, kvbreaker.Settings{FailClosed: true, HoldLimit: holdLimit, ReleaseInterval: release})
		now := time.Now()
		for _, tc := range []struct{ heldSince, retryAt time.Time }{
			{time.Time{}, now.Add(release)},
			{now.Add(-holdLimit + release + time.Second), now.Add(release)},
			{now.Add(-holdLimit + time.Second), now.Add(time.Second)},
		} {
			v, err := b.Allow(t.Context(), host, tc.heldSince)
			if err == nil || v.Decision != kvbreaker.Hold || !v.RetryAt.Equal(tc.retryAt) {
				t.Errorf("held since %v: Allow = %+v, %v; want Hold until %v and the store's error", tc.heldSince, v, err, tc.retryAt)
			}
		}
	})
}

// committedButFailed is a store whose compare-and-swaps are applied but
// answer with an error, as a write whose answer was lost.
type committedButFailed struct{ *memory.Store }

var errLost = errors.New("answer lost")

func (s committedButFailed) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	if _, err := s.Store.CompareAndSwap(ctx, key, old, value, ttl); err != nil {
		return 0, err
	}
	return 0, errLost
}

// TestUnknownWriteForgetsCachedRecord: after a write whose outcome is
// unknown, the cache no longer answers for the host: the next Allow reads
// what the store holds (here, the circuit the write opened).
func TestUnknownWriteForgetsCachedRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker(t, committedButFailed{memory.New()}, kvbreaker.Settings{CacheSize: 100, CacheStaleness: time.Hour, FailureThreshold: 1})
		if v := mustAllow(t, b, time.Time{}); v.Decision != kvbreaker.Send {
			t.Fatalf("Allow = %v, want Send", v.Decision)
		}
		if err := b.Failure(t.Context(), host); !errors.Is(err, errLost) {
			t.Fatalf("Failure = %v, want the lost answer", err)
		}
		if v := mustAllow(t, b, time.Time{}); v.Decision != kvbreaker.Hold {
			t.Fatalf("Allow after a write of unknown outcome = %v; want Hold (the store's record, not the cached one)", v.Decision)
		}
	})
}

// TestConflictWithAbsentRecordIsNoAnomaly: a compare-and-swap on a stale
// hint whose record another worker deleted conflicts with "absent": that
// is no undecodable record, and the write then creates the record.
func TestConflictWithAbsentRecordIsNoAnomaly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		store := &countingStore{Store: memory.New()}
		anomalies := 0
		b := newBreaker(t, store, kvbreaker.Settings{FailureThreshold: 10, Observer: &kvbreaker.Observer{
			RecordAnomaly: func(context.Context, kvbreaker.AnomalyInfo) { anomalies++ },
		}})
		other := newBreaker(t, store, kvbreaker.Settings{})
		if err := b.Failure(ctx, host); err != nil { // b's hint: the record it wrote
			t.Fatal(err)
		}
		if err := other.Success(ctx, host); err != nil { // deleted behind b's back
			t.Fatal(err)
		}
		w := store.writes.Load()
		if err := b.Failure(ctx, host); err != nil {
			t.Fatal(err)
		}
		if anomalies != 0 {
			t.Fatalf("%d anomalies reported for a conflict with an absent record; want none", anomalies)
		}
		if n := store.writes.Load() - w; n != 2 {
			t.Fatalf("%d writes; want 2 (the stale hint's conflict, then the record created)", n)
		}
		if st, err := b.Inspect(ctx, host); err != nil || len(st.Failures) != 1 {
			t.Fatalf("Inspect = %+v, %v; want the one new failure", st, err)
		}
	})
}

// TestDefaultCallTimeout: without CallTimeout, a store call that never
// answers costs the default CallTimeout (5 s).
func TestDefaultCallTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker(t, hangingStore{}, kvbreaker.Settings{})
		start := time.Now()
		v, err := b.Allow(context.Background(), host, time.Time{})
		if !errors.Is(err, context.DeadlineExceeded) || v.Decision != kvbreaker.Send {
			t.Fatalf("Allow = %v, %v; want Send and the deadline", v.Decision, err)
		}
		if took := time.Since(start); took != defaults.CallTimeout {
			t.Fatalf("took %v, want the default CallTimeout (%v)", took, defaults.CallTimeout)
		}
	})
}

// TestInspectInvalidHost: Inspect refuses a host the breaker cannot track
// without asking the store.
func TestInspectInvalidHost(t *testing.T) {
	store := &countingStore{Store: memory.New()}
	b := newBreaker(t, store, kvbreaker.Settings{})
	if st, err := b.Inspect(t.Context(), "bad\nhost"); !errors.Is(err, driver.ErrInvalidKey) || st.Found {
		t.Fatalf("Inspect of an invalid host = %+v, %v; want ErrInvalidKey", st, err)
	}
	if n := store.gets.Load(); n != 0 {
		t.Fatalf("%d store reads for an invalid host; want 0", n)
	}
}
