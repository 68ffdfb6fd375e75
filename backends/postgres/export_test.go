package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kvbreaker/kvbreaker/driver"
)

// CompareAndSwapIn sends CompareAndSwap's statement once on tx, so a test
// chooses the now() it is judged by and can make it wait for another's lock.
func (s *Store) CompareAndSwapIn(ctx context.Context, tx pgx.Tx, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	return s.compareAndSwap(ctx, tx, once, key, old, value, ttl)
}

// CompareAndDeleteIn sends CompareAndDelete's statement once on tx.
func (s *Store) CompareAndDeleteIn(ctx context.Context, tx pgx.Tx, key string, old driver.Version) error {
	return s.compareAndDelete(ctx, tx, once, key, old)
}

func once(_ context.Context, send func() error) error { return send() }

// ListSQL is the statement List sends when the prefix has an upper bound:
// $1 prefix, $2 cursor, $3 limit, $4 the bound.
func (s *Store) ListSQL() string { return s.sqlList }

// AcceptFutureBeats turns off, while on, the check that drops a beat on
// demand dated after its own arrival: the negative control of that check.
func AcceptFutureBeats(on bool) { acceptFutureBeats.Store(on) }

// BeatCounts returns how many beats on demand this process's feeds sent,
// how many clock samples they took to convert others', and how many beats
// they dropped as dated after their arrival.
func BeatCounts() (sent, samples, rejected int) {
	return int(beatCounts.sent.Load()), int(beatCounts.samples.Load()), int(beatCounts.rejected.Load())
}
