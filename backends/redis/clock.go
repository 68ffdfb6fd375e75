package redis

import (
	"context"
	"time"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

var (
	_ driver.ClockSampler = (*Store)(nil)
	_ driver.ExpiryReader = (*Store)(nil)
)

// SampleClock implements driver.ClockSampler with TIME, which answers the
// server's clock in microseconds. TIME has no key, so a ClusterClient sends
// it to any node: every node's clock expires keys, and each should be close
// to the others'.
func (s *Store) SampleClock(ctx context.Context) (time.Time, time.Duration, error) {
	return adapter.SampleClock(ctx, s.gate(), time.Microsecond, func(ctx context.Context) (time.Time, error) {
		return s.c.Time(ctx).Result()
	})
}
