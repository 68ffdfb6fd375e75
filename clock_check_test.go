package kvbreaker_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/skew"
)

// The tests in this file kill mutants of clock.go (go run ./tools/mutants
// -pkg . -files clock.go) that the other tests let live.

// failingClock is a store whose clock samples fail with err.
type failingClock struct {
	*skew.ClockStore
	err error
}

func (s *failingClock) SampleClock(context.Context) (time.Time, time.Duration, error) {
	return time.Time{}, 0, s.err
}

// TestCheckClockSampleError: a sample that fails makes CheckClock fail
// with its error and leaves the estimate as it was (none), rather than
// folding the zero time the failed call returned into it.
func TestCheckClockSampleError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errDown := errors.New("TIME refused")
		s := &failingClock{ClockStore: skewedStore(0, time.Microsecond, 0, 0), err: errDown}
		b := newBreaker(t, s, kvbreaker.Settings{SkipClockCheck: true})
		o, err := b.CheckClock(t.Context())
		if !errors.Is(err, errDown) || o != (kvbreaker.ClockOffset{}) {
			t.Fatalf("CheckClock over a failing sampler = %+v, %v; want no estimate and the sampler's error", o, err)
		}
		if o, ok := b.ClockOffset(); ok {
			t.Fatalf("ClockOffset after a failed sample = %+v, true; want none", o)
		}
	})
}

// TestCheckClockWorkerClockWentBack: when the worker's clock steps back
// during a sample, the round trip bounds nothing: CheckClock fails and
// keeps the estimate it had.
func TestCheckClockWorkerClockWentBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reads := 0
		clock := func() time.Time { // every second read is an hour back
			reads++
			if reads%2 == 0 {
				return time.Now().Add(-time.Hour)
			}
			return time.Now()
		}
		b := newBreaker(t, skewedStore(0, time.Microsecond, time.Millisecond, time.Millisecond), kvbreaker.Settings{Clock: clock, SkipClockCheck: true})
		o, err := b.CheckClock(t.Context())
		if err == nil || o != (kvbreaker.ClockOffset{}) {
			t.Fatalf("CheckClock with the worker's clock stepping back = %+v, %v; want no estimate and an error", o, err)
		}
		if o, ok := b.ClockOffset(); ok {
			t.Fatalf("ClockOffset after a sample the clock stepped back in = %+v, true; want none", o)
		}
	})
}

var _ driver.ClockSampler = (*failingClock)(nil)

// TestCheckClockExactClock: a store that reads its clock exactly, over a
// round trip that takes no time, gives an estimate with no uncertainty;
// every sample is reported as a store call, and an Observer that does not
// set ClockOffset is not called for one.
func TestCheckClockExactClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var outcomes []string
		obs := &kvbreaker.Observer{StoreCall: func(ctx context.Context, e kvbreaker.StoreCallInfo) (context.Context, func(kvbreaker.StoreCallDoneInfo)) {
			if e.Op != "sample_clock" {
				return ctx, nil
			}
			return ctx, func(d kvbreaker.StoreCallDoneInfo) { outcomes = append(outcomes, d.Outcome) }
		}}
		b := newBreaker(t, skewedStore(3*time.Second, 0, 0, 0), kvbreaker.Settings{SkipClockCheck: true, Observer: obs})
		o, err := b.CheckClock(t.Context())
		if err != nil || o.Offset != 3*time.Second || o.Uncertainty != 0 {
			t.Fatalf("CheckClock = %+v, %v; want 3s ± 0", o, err)
		}
		if len(outcomes) != 3 || outcomes[0] != "ok" {
			t.Fatalf("sample store calls reported %v; want 3 OK", outcomes)
		}
	})
}

// TestDefaultClockCheckInterval: without ClockCheckInterval, the
// background check runs at the first store call and again only
// DefaultClockCheckInterval later.
func TestDefaultClockCheckInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGated(0)
		close(g.release)
		b := newBreaker(t, g, kvbreaker.Settings{})
		defer b.Close(t.Context())
		var start time.Time
		allow := func(want int32) {
			t.Helper()
			mustAllow(t, b, time.Time{})
			synctest.Wait()
			if n := g.calls.Load(); n != want {
				t.Fatalf("after %v: %d samples, want %d", time.Since(start), n, want)
			}
		}
		start = time.Now()
		allow(1)
		allow(1)
		time.Sleep(defaults.ClockCheckInterval - time.Second)
		allow(1)
		time.Sleep(time.Second)
		allow(2)
	})
}
