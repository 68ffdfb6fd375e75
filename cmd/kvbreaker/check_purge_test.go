package main

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/internal/testservers/pgtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// TestCheckLeavesNothing: a whole check (expiry waits included) against a
// real Redis and a real PostgreSQL leaves no key, tombstone or expired row
// under its prefix, and its report counts what it purged. Before, it
// reported "removed 42 keys" and left every tombstone (Redis) and every
// expired row and tombstone (PostgreSQL) behind.
func TestCheckLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("waits in real time for expiry")
	}
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		srv := redistest.MustStart(t)
		rep := checkJSON(t, exitOK, "--backend", "redis", "--redis-url", srv.URL(), "--quiet")
		cli := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
		defer cli.Close()
		keys, err := cli.Keys(t.Context(), "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 0 || rep.Cleanup.Left != 0 || rep.Cleanup.Deleted == 0 || rep.Cleanup.Purged < rep.Cleanup.Deleted {
			t.Errorf("after check (prefix %q): %d keys left (first: %q), cleanup %+v", rep.Prefix, len(keys), keys[:min(3, len(keys))], rep.Cleanup)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		srv := pgtest.MustStart(t)
		ctx := t.Context()
		pool, err := pgxpool.New(ctx, srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		if err := postgres.CreateTable(ctx, pool, "kvbreaker"); err != nil {
			t.Fatal(err)
		}
		rep := checkJSON(t, exitOK, "--backend", "postgres", "--postgres-url", srv.URL(), "--quiet")
		var rows, expired int
		if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE expires_at <= now()) FROM kvbreaker`).Scan(&rows, &expired); err != nil {
			t.Fatal(err)
		}
		if rows != 0 || rep.Cleanup.Left != 0 || rep.Cleanup.Deleted == 0 || rep.Cleanup.Purged < rep.Cleanup.Deleted {
			t.Errorf("after check (prefix %q): %d rows left (%d expired or tombstones), cleanup %+v", rep.Prefix, rows, expired, rep.Cleanup)
		}
	})
}
