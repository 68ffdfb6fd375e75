package kvbreaker_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
)

// interleaved runs before once, just ahead of the first CompareAndSwap it
// forwards: another worker's write lands between this Breaker's clock read
// and its own write.
type interleaved struct {
	*memory.Store
	before func()
}

func (s *interleaved) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	if f := s.before; f != nil {
		s.before = nil
		f()
	}
	return s.Store.CompareAndSwap(ctx, key, old, value, ttl)
}

// TestFailureKeepsConcurrentInstant: worker A reads its clock (t0), worker
// B stores a failure at t0+5ms, A's compare-and-swap conflicts and A
// decides again on B's record. B's instant must be stored as B stamped it,
// not clamped back to A's t0 as if B's clock ran fast, and A's failure is
// stamped by a clock read after it saw B's. Clamping B's instant to A's
// first reading would leave the record holding [t0 t0].
func TestFailureKeepsConcurrentInstant(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	reads := 0
	clockA := func() time.Time { // t0, then 10 ms later
		reads++
		if reads == 1 {
			return t0
		}
		return t0.Add(10 * time.Millisecond)
	}
	mem := memory.New()
	store := &interleaved{Store: mem}
	s := kvbreaker.Settings{FailureThreshold: 10, Clock: clockA, SkipClockCheck: true}
	a := newBreaker(t, store, s)
	b := newBreaker(t, mem, kvbreaker.Settings{FailureThreshold: 10, Clock: func() time.Time { return t0.Add(5 * time.Millisecond) }})
	store.before = func() {
		if err := b.Failure(ctx, host); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Failure(ctx, host); err != nil {
		t.Fatal(err)
	}
	st, err := a.Inspect(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Time{t0.Add(5 * time.Millisecond), t0.Add(10 * time.Millisecond)}
	if !slices.EqualFunc(st.Failures, want, time.Time.Equal) {
		t.Errorf("stored failures %v, want %v", st.Failures, want)
	}
}
