package adapter

import (
	"context"
	"time"
)

// SampleClock is a driver.ClockSampler's SampleClock for a store whose
// server answers its clock in one call: read, sent unless g finds the store
// closed, and its reading with resolution, the unit the server reads its
// clock in. The closed store's ErrClosed and read's error go through g's
// Wrap with OpClock. The caller times the whole call, so read may retry a
// connection whose answer was lost: the reading still lies within it.
func SampleClock(ctx context.Context, g Gate, resolution time.Duration, read func(context.Context) (time.Time, error)) (time.Time, time.Duration, error) {
	if g.Closed() {
		return time.Time{}, 0, g.Wrap(OpClock, "", g.ErrClosed)
	}
	t, err := read(ctx)
	if err != nil {
		return time.Time{}, 0, g.Wrap(OpClock, "", err)
	}
	return t, resolution, nil
}
