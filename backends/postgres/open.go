package postgres

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kvbreaker/kvbreaker/adapter"
)

// dialTimeout is the ConnectTimeout Open gives a configuration that sets
// none.
const dialTimeout = 2 * time.Second

// Dial makes a pool of connString (ParseConfig's, whose error never shows a
// secret) and returns a Store over table on it, as Open does.
func Dial(ctx context.Context, connString, table string, opts ...Option) (*Store, error) {
	cfg, err := ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	return Open(ctx, cfg, table, opts...)
}

// Open makes a pool of cfg (ParseConfig's, adjusted by the caller) and
// returns a Store over table on it, which the Store's Close closes. The
// pool's connections are bounded by cfg's ConnectTimeout, 2 s if it sets
// none, and their number by WithMaxConns if given. Before making the pool
// it dials the server once, within that timeout, so that a refused port, a
// missing socket or an unknown host is an *driver.UnreachableError at once
// rather than a pool that retries until its caller's deadline. It sends no
// statement: Ping checks that the server answers and the table exists.
func Open(ctx context.Context, cfg *pgxpool.Config, table string, opts ...Option) (*Store, error) {
	// The bounds go on a copy: the caller's configuration stays as given.
	cfg = cfg.Copy()
	cc := cfg.ConnConfig
	network, addr := "tcp", endpointOf(cc)
	if cc.ConnectTimeout <= 0 {
		cc.ConnectTimeout = dialTimeout
	}
	if n := apply(opts).maxConns; n > 0 {
		cfg.MaxConns = int32(min(n, math.MaxInt32))
	}
	if strings.HasPrefix(cc.Host, "/") {
		network = "unix"
	}
	if err := adapter.CheckDial(ctx, "postgres", network, addr, cc.ConnectTimeout); err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres at %s: %w", addr, err)
	}
	s, err := New(pool, table, opts...)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownPool = true
	return s, nil
}

// String names the table and the server, for a tool's output or a log:
// "postgres table kvbreaker at db:5432", without credentials.
func (s *Store) String() string { return "postgres table " + s.table + " at " + s.endpoint }
