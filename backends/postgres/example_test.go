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
	// -- Follow's feed: each change of a row notifies channel kvbreaker_changes with its key.
	// CREATE OR REPLACE FUNCTION "kvbreaker_notify"() RETURNS trigger LANGUAGE plpgsql AS $fn$
	// BEGIN
	// 	IF TG_LEVEL = 'STATEMENT' THEN
	// 		PERFORM pg_notify('kvbreaker_changes', '*'); -- TRUNCATE: every follower resynchronises
	// 		RETURN NULL;
	// 	END IF;
	// 	IF TG_OP = 'UPDATE' AND NEW.key = OLD.key AND NEW.version = OLD.version
	// 		AND NEW.expires_at = OLD.expires_at AND NEW.value = OLD.value THEN
	// 		RETURN NULL; -- a failed compare rewrote the row unchanged
	// 	END IF;
	// 	IF TG_OP = 'DELETE' AND OLD.expires_at = '-infinity' THEN
	// 		RETURN NULL; -- a purged tombstone: its delete was notified
	// 	END IF;
	// 	IF TG_OP <> 'INSERT' THEN
	// 		PERFORM pg_notify('kvbreaker_changes', CASE WHEN octet_length(OLD.key) <= 7900
	// 			THEN 'k' || OLD.key ELSE '~' || left(OLD.key, 1000) END);
	// 	END IF;
	// 	IF TG_OP = 'INSERT' OR TG_OP = 'UPDATE' AND NEW.key <> OLD.key THEN
	// 		PERFORM pg_notify('kvbreaker_changes', CASE WHEN octet_length(NEW.key) <= 7900
	// 			THEN 'k' || NEW.key ELSE '~' || left(NEW.key, 1000) END);
	// 	END IF;
	// 	RETURN NULL;
	// END
	// $fn$;
	// DO $do$ BEGIN
	// 	IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = '"kvbreaker"'::regclass AND tgname = 'kvbreaker_notify') THEN
	// 		CREATE TRIGGER "kvbreaker_notify" AFTER INSERT OR UPDATE OR DELETE ON "kvbreaker"
	// 			FOR EACH ROW EXECUTE FUNCTION "kvbreaker_notify"();
	// 	END IF;
	// 	IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = '"kvbreaker"'::regclass AND tgname = 'kvbreaker_truncate') THEN
	// 		CREATE TRIGGER "kvbreaker_truncate" AFTER TRUNCATE ON "kvbreaker"
	// 			FOR EACH STATEMENT EXECUTE FUNCTION "kvbreaker_notify"();
	// 	END IF;
	// END $do$;
}
