package skew

import (
	"context"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// ClockStore is a store whose server clock a Breaker can read
// (driver.ClockSampler), off from true time by as much as its Clock says:
// for testing clock-offset detection (kvbreaker.Breaker.CheckClock) without
// changing a real server's clock. Each sample waits Before, reads Clock
// truncated to Resolution, and waits After, as a request, the server's
// clock command and the reply would; inside a testing/synctest bubble those
// waits take no real time.
//
// Its Traits are the inner store's, except that InProcess is false: a
// store whose clock takes a round trip to read is not in-process, and a
// Breaker checks only such stores in the background.
type ClockStore struct {
	driver.Store
	// Clock is the server's clock; nil means time.Now. A Clock's Now gives
	// it an offset (and drift) from true time.
	Clock func() time.Time
	// Resolution is what the server's readings are truncated to: 1 s for an
	// HTTP Date header, 1 µs for Redis TIME. Zero means exact.
	Resolution time.Duration
	// Before and After are the two halves of a sample's round trip: the
	// wait before the server reads its clock and the wait after.
	Before, After time.Duration
}

var _ driver.ClockSampler = (*ClockStore)(nil)

// Traits returns the inner store's traits with InProcess false.
func (s *ClockStore) Traits() driver.Traits {
	t := s.Store.Traits()
	t.InProcess = false
	return t
}

// SampleClock implements driver.ClockSampler; it fails with ctx's error if
// ctx ends during a wait.
func (s *ClockStore) SampleClock(ctx context.Context) (time.Time, time.Duration, error) {
	if err := wait(ctx, s.Before); err != nil {
		return time.Time{}, 0, err
	}
	now := time.Now
	if s.Clock != nil {
		now = s.Clock
	}
	t := now().Round(0)
	if s.Resolution > 0 {
		t = t.Truncate(s.Resolution)
	}
	if err := wait(ctx, s.After); err != nil {
		return time.Time{}, 0, err
	}
	return t, s.Resolution, nil
}

// wait waits d or until ctx ends.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
