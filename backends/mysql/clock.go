package mysql

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

var (
	_ driver.ClockSampler = (*Store)(nil)
	_ driver.ExpiryReader = (*Store)(nil)
)

// SampleClock implements driver.ClockSampler with SELECT UTC_TIMESTAMP(6)
// (as microseconds since the epoch), the server's clock when the statement
// starts, to the microsecond. A connection whose answer was lost is
// retried as Get is: the caller times the whole call, so the reading still
// lies within it.
func (s *Store) SampleClock(ctx context.Context) (time.Time, time.Duration, error) {
	return adapter.SampleClock(ctx, s.gate(), time.Microsecond, func(ctx context.Context) (time.Time, error) {
		var us int64
		err := s.queryRow(ctx, stClock, nil, &us)
		return time.UnixMicro(us), err
	})
}

// Expiry implements driver.ExpiryReader: the time until the row's
// expires_at by the server's clock, to the microsecond; driver.NoExpiry when
// expires_at is on 9999-12-31 (which only another program writes); and
// driver.ErrNotFound when Get reads the key as absent (no row, an expired
// one, or a tombstone), though the row stays until purged.
func (s *Store) Expiry(ctx context.Context, key string) (time.Duration, error) {
	if s.closed.Load() {
		return 0, s.wrap(adapter.OpExpiry, key, ErrClosed)
	}
	if err := checkKey(key); err != nil {
		return 0, s.wrap(adapter.OpExpiry, key, err)
	}
	var us int64
	err := s.queryRow(ctx, stExpiry, []any{key}, &us)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, driver.ErrNotFound
	case err != nil:
		return 0, s.wrap(adapter.OpExpiry, key, err)
	}
	return adapter.RowExpiry(us), nil
}
