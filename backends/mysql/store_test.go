package mysql_test

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/mysql"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

var tableSeq atomic.Int64

// ownTable creates a table of the test's own on the shared server.
func ownTable(t *testing.T, db *sql.DB) string {
	t.Helper()
	name := fmt.Sprintf("purge_%d", tableSeq.Add(1))
	if err := mysql.CreateTable(t.Context(), db, name); err != nil {
		t.Fatal(err)
	}
	return name
}

func countRows(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPurgeBatches: expired rows and tombstones are deleted in batches of
// WithPurgeBatch, live rows stay, and a row a transaction holds is skipped
// rather than waited for.
func TestPurgeBatches(t *testing.T) {
	ctx := t.Context()
	db := newDB(t, server.DSN())
	tbl := ownTable(t, db)
	s, err := mysql.New(db, tbl, mysql.WithPurgeEvery(0), mysql.WithPurgeBatch(10), mysql.WithPurgeDelay(time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hold := func() func() error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback() })
		if _, err := tx.ExecContext(ctx, "SELECT 1 FROM "+tbl+" WHERE k = 'gone-00' FOR UPDATE"); err != nil {
			t.Fatal(err)
		}
		return tx.Rollback
	}
	backendtest.PurgeBatches(t, s, hold, func() int { return countRows(t, db, tbl) })
}

// TestPurgeKeepsTombstoneForDelay: a tombstone stays until WithPurgeDelay
// after the delete, so that a resent delete still finds it.
func TestPurgeKeepsTombstoneForDelay(t *testing.T) {
	ctx := t.Context()
	db := newDB(t, server.DSN())
	tbl := ownTable(t, db)
	s, err := mysql.New(db, tbl, mysql.WithPurgeEvery(0))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v, err := s.CompareAndSwap(ctx, "k", driver.NoVersion, []byte("x"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompareAndDelete(ctx, "k", v); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Purge(ctx); err != nil || n != 0 {
		t.Errorf("Purge right after the delete = %d, %v; want 0 (the default delay is a minute)", n, err)
	}
	if n := countRows(t, db, tbl); n != 1 {
		t.Errorf("%d rows, want the tombstone", n)
	}
}

// TestPurgeEveryWrites: with WithPurgeEvery(n), the n-th write starts a
// purge in the background; Close waits for it.
func TestPurgeEveryWrites(t *testing.T) {
	ctx := t.Context()
	db := newDB(t, server.DSN())
	tbl := ownTable(t, db)
	s, err := mysql.New(db, tbl, mysql.WithPurgeEvery(5), mysql.WithPurgeDelay(time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := s.CompareAndSwap(ctx, fmt.Sprintf("gone-%d", i), driver.NoVersion, []byte("x"), time.Microsecond); err != nil {
			t.Fatal(err)
		}
	}
	if n := countRows(t, db, tbl); n != 4 {
		t.Fatalf("%d rows before the fifth write, want 4 (no purge yet)", n)
	}
	if _, err := s.CompareAndSwap(ctx, "live", driver.NoVersion, []byte("x"), time.Hour); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if n := countRows(t, db, tbl); n != 1 {
		t.Errorf("%d rows after the fifth write's purge, want 1", n)
	}
}

// TestOptionErrors: every invalid argument is reported at once, each a
// *driver.OptionError.
func TestOptionErrors(t *testing.T) {
	_, err := mysql.New(nil, "bad`name", mysql.WithPurgeBatch(0), mysql.WithPurgeEvery(-1), mysql.WithPurgeDelay(0), mysql.WithCallTimeout(-time.Second))
	for _, want := range []string{
		"mysql: invalid db: nil", "mysql: invalid table name: \"bad`name\"",
		"mysql: invalid WithPurgeBatch: 0", "mysql: invalid WithPurgeEvery: -1",
		"mysql: invalid WithPurgeDelay: 0s", "mysql: invalid WithCallTimeout: -1s",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New = %v, want it to say %q", err, want)
		}
	}
	if _, ok := errors.AsType[*driver.OptionError](err); !ok {
		t.Errorf("New = %T, want *driver.OptionError inside", err)
	}
	if _, err := mysql.Schema("Kvbreaker"); err == nil {
		t.Error("Schema accepted an upper-case name")
	}
}

// TestKeyTooLong: a key the k column cannot hold is refused before
// anything is sent, naming the limit, rather than cut short by a server
// outside strict mode.
func TestKeyTooLong(t *testing.T) {
	s := newRaw(t)
	key := strings.Repeat("k", mysql.MaxKeyLen+1)
	_, err := s.CompareAndSwap(t.Context(), key, driver.NoVersion, []byte("x"), time.Minute)
	if err == nil || !strings.Contains(err.Error(), "longer than the table's 1024") {
		t.Errorf("CompareAndSwap of a %d-byte key = %v, want refused", len(key), err)
	}
	if _, _, err := s.Get(t.Context(), key); err == nil || errors.Is(err, driver.ErrNotFound) {
		t.Errorf("Get of a %d-byte key = %v, want refused", len(key), err)
	}
}

// TestList: live keys under a prefix, in order, paginated by key; expired
// and deleted ones are not listed.
func TestList(t *testing.T) {
	backendtest.LiveListing(t, newStore(t), time.Microsecond, nil)
}

// TestCreateOverLiveAndDead: a create over a live row is a conflict
// carrying it; over an expired row or a tombstone it applies, with a new
// version, in one statement.
func TestCreateOverLiveAndDead(t *testing.T) {
	ctx := t.Context()
	st := newStore(t)
	v1, err := st.CompareAndSwap(ctx, "k", driver.NoVersion, []byte("one"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.CompareAndSwap(ctx, "k", driver.NoVersion, []byte("two"), time.Hour)
	if ce, ok := errors.AsType[*driver.ConflictError](err); !ok || ce.Version != v1 || string(ce.Value) != "one" {
		t.Fatalf("create over a live row = %v, want a conflict with one@%d", err, v1)
	}
	if err := st.CompareAndDelete(ctx, "k", v1); err != nil {
		t.Fatal(err)
	}
	v2, err := st.CompareAndSwap(ctx, "k", driver.NoVersion, []byte("three"), time.Microsecond)
	if err != nil || v2 == v1 {
		t.Fatalf("create over a tombstone = %d, %v; want a new version", v2, err)
	}
	v3, err := st.CompareAndSwap(ctx, "k", driver.NoVersion, []byte("four"), time.Hour)
	if err != nil || v3 == v2 || v3 == v1 {
		t.Fatalf("create over an expired row = %d, %v; want a new version", v3, err)
	}
	if got, ver, err := st.Get(ctx, "k"); err != nil || string(got) != "four" || ver != v3 {
		t.Errorf("Get = %q, %d, %v; want four, %d", got, ver, err, v3)
	}
}
