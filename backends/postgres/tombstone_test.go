package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestTombstoneDeadToEarlierStatement: a tombstone expires at
// '-infinity', so it is dead even to a statement that started before the
// delete. A statement's now() is its transaction's start; a statement that
// started before a compare-and-delete and then waited for the delete's row
// lock judges the tombstone with that earlier now(). A tombstone expiring
// at the delete's own now() would still be live to such a statement: a
// create would be refused with a conflict naming the tombstone (an empty
// value), and a swap of the deleted version would report the tombstone's
// version instead of an absent key, though the delete had committed first.
//
// The order is made explicit, not raced: transaction A starts (fixing its
// now()), then transaction D starts (a later now()) and runs the store's
// delete; A's statement, the store's own, is sent and waits for D's row
// lock (pg_blocking_pids says so); D commits; A proceeds. With now() as
// the tombstone's expiry in sqlDelete, both subtests fail, each with
// "version conflict (current version N)", N the tombstone's.
func TestTombstoneDeadToEarlierStatement(t *testing.T) {
	t.Run("create", func(t *testing.T) {
		s, pool, key, v1 := tombstoneSetup(t)
		ver, err := racedWithDelete(t, s, pool, key, v1, func(ctx context.Context, tx pgx.Tx) (driver.Version, error) {
			return s.CompareAndSwapIn(ctx, tx, key, driver.NoVersion, []byte("new"), time.Hour)
		})
		if err != nil {
			t.Fatalf("create after the delete committed = %v, want it applied (the key is deleted)", err)
		}
		if ver <= v1 {
			t.Errorf("create got version %d, want one after %d", ver, v1)
		}
		if got, gv, err := s.Get(t.Context(), key); err != nil || string(got) != "new" || gv != ver {
			t.Errorf("Get = %q, %d, %v; want new, %d", got, gv, err, ver)
		}
	})
	t.Run("swap", func(t *testing.T) {
		s, pool, key, v1 := tombstoneSetup(t)
		_, err := racedWithDelete(t, s, pool, key, v1, func(ctx context.Context, tx pgx.Tx) (driver.Version, error) {
			return s.CompareAndSwapIn(ctx, tx, key, v1, []byte("new"), time.Hour)
		})
		ce, ok := errors.AsType[*driver.ConflictError](err)
		if !ok || ce.Version != driver.NoVersion {
			t.Errorf("swap of the deleted version = %v, want a conflict with NoVersion (the key is deleted)", err)
		}
		if _, _, err := s.Get(t.Context(), key); !errors.Is(err, driver.ErrNotFound) {
			t.Errorf("Get = %v, want not found", err)
		}
	})
}

// tombstoneSetup writes a live key and returns a store, its pool, the key
// and its version.
func tombstoneSetup(t *testing.T) (*postgres.Store, *pgxpool.Pool, string, driver.Version) {
	t.Helper()
	pool := newPool(t, server.URL())
	s, err := postgres.New(pool, table, postgres.WithPurgeEvery(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	key := uniquePrefix(t) + "a.example"
	v1, err := s.CompareAndSwap(t.Context(), key, driver.NoVersion, []byte("old"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return s, pool, key, v1
}

// racedWithDelete runs stmt in a transaction A that started before a
// transaction D that deletes key at v1, with stmt waiting for D's row lock
// until D commits, and returns stmt's result.
func racedWithDelete(t *testing.T, s *postgres.Store, pool *pgxpool.Pool, key string, v1 driver.Version, stmt func(context.Context, pgx.Tx) (driver.Version, error)) (driver.Version, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	begin := func() (pgx.Tx, time.Time) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback(context.Background()) }) //nolint:errcheck // after Commit it does nothing
		var now time.Time
		if err := tx.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
			t.Fatal(err)
		}
		return tx, now
	}
	txA, t0 := begin()
	txD, t1 := begin()
	if !t1.After(t0) {
		// Equal instants would let the old expiry pass too.
		t.Fatalf("D's now() %v is not after A's %v", t1, t0)
	}
	if err := s.CompareAndDeleteIn(ctx, txD, key, v1); err != nil {
		t.Fatalf("delete in D = %v", err)
	}
	type answer struct {
		v   driver.Version
		err error
	}
	done := make(chan answer, 1)
	go func() {
		v, err := stmt(ctx, txA)
		done <- answer{v, err}
	}()
	waitBlocked(t, ctx, pool, txA.Conn().PgConn().PID(), txD.Conn().PgConn().PID())
	if err := txD.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return a.v, a.err
}

// waitBlocked returns once the backend waiter waits for a lock that holder
// holds, as the server reports it.
func waitBlocked(t *testing.T, ctx context.Context, pool *pgxpool.Pool, waiter, holder uint32) {
	t.Helper()
	for {
		var blocked bool
		err := pool.QueryRow(ctx, "SELECT $2::int = ANY(pg_blocking_pids($1::int))", int64(waiter), int64(holder)).Scan(&blocked)
		if err != nil {
			t.Fatalf("waiting for backend %d to wait for %d: %v", waiter, holder, err)
		}
		if blocked {
			return
		}
	}
}
