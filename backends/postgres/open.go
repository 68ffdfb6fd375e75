package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kvbreaker/kvbreaker/adapter"
)

// dialTimeout is Open's first connection's bound when cfg sets no
// ConnectTimeout.
const dialTimeout = 2 * time.Second

// Open makes a pool of cfg (ParseConfig's, adjusted by the caller: its
// size, its ConnectTimeout) and returns a Store over table on it, which
// the Store's Close closes. Before making the pool it dials the server once,
// within cfg's ConnectTimeout (2 s if none), so that a refused port, a
// missing socket or an unknown host is an *driver.UnreachableError at once rather
// than a pool that retries until its caller's deadline. It sends no
// statement: Ping checks that the server answers and the table exists.
func Open(ctx context.Context, cfg *pgxpool.Config, table string, opts ...Option) (*Store, error) {
	cc := cfg.ConnConfig
	timeout, network, addr := dialTimeout, "tcp", endpointOf(cc)
	if cc.ConnectTimeout > 0 {
		timeout = cc.ConnectTimeout
	}
	if strings.HasPrefix(cc.Host, "/") {
		network = "unix"
	}
	if err := adapter.CheckDial(ctx, "postgres", network, addr, timeout); err != nil {
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

// Endpoint is where the store's pool connects: host:port, or a unix
// socket's path, for messages.
func (s *Store) Endpoint() string { return s.endpoint }

// String names the table and the server, for a tool's output or a log:
// "postgres table kvbreaker at db:5432", without credentials.
func (s *Store) String() string { return "postgres table " + s.table + " at " + s.endpoint }
