package postgres

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

// sqlClock reads the server's clock as the statement runs.
const sqlClock = "SELECT clock_timestamp()"

// SampleClock implements driver.ClockSampler with SELECT clock_timestamp(),
// the server's clock as the statement runs, in microseconds (now() is the
// start of the transaction, not the reading). A connection whose answer was
// lost is retried as Get is: the caller times the whole call, so the
// reading still lies within it.
func (s *Store) SampleClock(ctx context.Context) (time.Time, time.Duration, error) {
	return adapter.SampleClock(ctx, s.gate(), time.Microsecond, func(ctx context.Context) (time.Time, error) {
		var t time.Time
		err := s.retry(ctx, func() error {
			return s.pool.QueryRow(ctx, sqlClock).Scan(&t)
		})
		return t, err
	})
}
