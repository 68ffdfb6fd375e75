package postgres_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/postgres"
)

// A fleet's Breakers over one PostgreSQL table, created if missing.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, server.URL()) // e.g. postgres://user@db:5432/app
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	if err := postgres.CreateTable(ctx, pool, "kvbreaker"); err != nil {
		fmt.Println(err)
		return
	}
	store, err := postgres.New(pool, "kvbreaker")
	if err != nil {
		fmt.Println(err)
		return
	}
	fleet, err := kvbreaker.Prefixed(store, "example/")
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := kvbreaker.New(fleet, kvbreaker.Settings{FailureThreshold: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close(ctx)
	_ = b.Failure(ctx, "down.example")
	v, _ := b.Allow(ctx, "down.example", time.Time{})
	fmt.Println(v.Decision)
	// Output: hold
}

// The SQL CreateTable runs, for those who migrate their own schema.
func ExampleSchema() {
	sql, _ := postgres.Schema("kvbreaker")
	fmt.Print(sql)
	// Output:
	// CREATE SEQUENCE IF NOT EXISTS "kvbreaker_version" AS bigint;
	// CREATE TABLE IF NOT EXISTS "kvbreaker" (
	// 	key        text COLLATE "C" PRIMARY KEY,
	// 	value      bytea       NOT NULL,
	// 	version    bigint      NOT NULL,
	// 	expires_at timestamptz NOT NULL,
	// 	purge_at   timestamptz NOT NULL,
	// 	writes     bigint[]    NOT NULL,
	// 	versions   bigint[]    NOT NULL
	// );
	// CREATE INDEX IF NOT EXISTS "kvbreaker_purge_at" ON "kvbreaker" (purge_at);
}
