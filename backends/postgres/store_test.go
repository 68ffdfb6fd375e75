package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

var tableSeq atomic.Int64

// ownTable creates a table of the test's own on the shared server.
func ownTable(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	name := fmt.Sprintf("purge_%d", tableSeq.Add(1))
	if err := postgres.CreateTable(t.Context(), pool, name); err != nil {
		t.Fatal(err)
	}
	return name
}

func countRows(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPurgeBatches: expired rows and tombstones are deleted in batches of
// WithPurgeBatch, live rows stay, and a row a transaction holds is skipped
// rather than waited for.
func TestPurgeBatches(t *testing.T) {
	ctx := t.Context()
	pool := newPool(t, server.URL())
	tbl := ownTable(t, pool)
	s, err := postgres.New(pool, tbl, postgres.WithPurgeEvery(0), postgres.WithPurgeBatch(10), postgres.WithPurgeDelay(time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hold := func() func() error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		if _, err := tx.Exec(ctx, "SELECT 1 FROM "+tbl+" WHERE key = 'gone-00' FOR UPDATE"); err != nil {
			t.Fatal(err)
		}
		return func() error { return tx.Rollback(ctx) }
	}
	backendtest.PurgeBatches(t, s, hold, func() int { return countRows(t, pool, tbl) })
}

// TestPurgeEveryWrites: with WithPurgeEvery(n), the n-th write starts a
// purge in the background; Close waits for it.
func TestPurgeEveryWrites(t *testing.T) {
	ctx := t.Context()
	pool := newPool(t, server.URL())
	tbl := ownTable(t, pool)
	s, err := postgres.New(pool, tbl, postgres.WithPurgeEvery(5), postgres.WithPurgeDelay(time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := s.CompareAndSwap(ctx, fmt.Sprintf("gone-%d", i), driver.NoVersion, []byte("x"), time.Microsecond); err != nil {
			t.Fatal(err)
		}
	}
	if n := countRows(t, pool, tbl); n != 4 {
		t.Fatalf("%d rows before the fifth write, want 4 (no purge yet)", n)
	}
	if _, err := s.CompareAndSwap(ctx, "live", driver.NoVersion, []byte("x"), time.Hour); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if n := countRows(t, pool, tbl); n != 1 {
		t.Errorf("%d rows after the fifth write's purge, want 1", n)
	}
}

// TestOptionErrors: every invalid argument is reported at once, each a
// *driver.OptionError.
func TestOptionErrors(t *testing.T) {
	_, err := postgres.New(nil, `bad"name`, postgres.WithPurgeBatch(0), postgres.WithPurgeEvery(-1), postgres.WithPurgeDelay(0), postgres.WithCallTimeout(-time.Second))
	for _, want := range []string{
		"postgres: invalid pool: nil", `postgres: invalid table name: "bad\"name"`,
		"postgres: invalid WithPurgeBatch: 0", "postgres: invalid WithPurgeEvery: -1",
		"postgres: invalid WithPurgeDelay: 0s", "postgres: invalid WithCallTimeout: -1s",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New = %v, want it to say %q", err, want)
		}
	}
	if _, ok := errors.AsType[*driver.OptionError](err); !ok {
		t.Errorf("New = %T, want *driver.OptionError inside", err)
	}
	if _, err := postgres.New(nil, table); err == nil || err.Error() != "postgres: invalid pool: nil: pass a *pgxpool.Pool (pgxpool.New)" {
		t.Errorf("New(nil) = %v", err)
	}
	if _, err := postgres.Schema("Kvbreaker"); err == nil {
		t.Error("Schema accepted an upper-case name")
	}
}

// TestList: live keys under a prefix, in order, paginated by key; expired
// and deleted ones are not listed.
func TestList(t *testing.T) {
	backendtest.LiveListing(t, newStore(t), time.Microsecond, nil)
}
