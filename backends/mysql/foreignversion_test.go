package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/mysql"
	"github.com/kvbreaker/kvbreaker/driver"
)

// uncheckedTable is a table as a server that does not enforce CHECK
// (MySQL before 8.0.16) or a hand-made migration leaves it: the store's
// schema without the constraint that keeps versions positive.
const uncheckedTable = "kvbreaker_unchecked"

// newUnchecked returns a Store over uncheckedTable and a pool for planting
// rows in it.
func newUnchecked(t *testing.T) (*mysql.Store, *sql.DB) {
	t.Helper()
	ctx := t.Context()
	db := newDB(t, server.DSN())
	schema, err := mysql.Schema(uncheckedTable)
	if err != nil {
		t.Fatal(err)
	}
	check := fmt.Sprintf(",\n\tCONSTRAINT `%s_version` CHECK (version > 0)", uncheckedTable)
	unchecked := strings.Replace(schema, check, "", 1)
	if unchecked == schema {
		t.Fatalf("the schema has no %q to leave out:\n%s", check, schema)
	}
	if _, err := db.ExecContext(ctx, unchecked); err != nil {
		t.Fatal(err)
	}
	s, err := mysql.New(newDB(t, server.DSN()), uncheckedTable, mysql.WithEndpoint(server.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, db
}

// plantVersion stores a live row of value with the given version at key,
// replacing what is there.
func plantVersion(ctx context.Context, db *sql.DB, key string, value []byte, version int64) error {
	_, err := db.ExecContext(ctx, "REPLACE INTO "+uncheckedTable+
		" (k, value, version, expires_at, purge_at, writes) VALUES (?, ?, ?, '9999-12-31 23:59:59.999999', '9999-12-31', '')",
		key, value, version)
	return err
}

// TestForeignVersionRow: a live row whose version is 0 or negative reads as
// its value with a version that names exactly that row's content: it
// changes when the content does, a write naming an older one conflicts
// (reporting the current one) and changes nothing, and one naming the
// current one replaces the row. Such a row is refused by the schema's CHECK
// wherever CHECK is enforced, so the table here has none.
func TestForeignVersionRow(t *testing.T) {
	ctx := t.Context()
	st, db := newUnchecked(t)
	prefix := uniquePrefix(t)
	for _, version := range []int64{0, -5, -1 << 63} {
		t.Run(fmt.Sprint(version), func(t *testing.T) {
			key := fmt.Sprintf("%sv%d", prefix, version)
			if err := plantVersion(ctx, db, key, []byte("\x00garbage"), version); err != nil {
				t.Fatal(err)
			}
			v, v1, err := st.Get(ctx, key)
			if err != nil || string(v) != "\x00garbage" || v1 < 1<<63 {
				t.Fatalf("Get of a row with version %d = %q, %d, %v; want its value with a version of at least 2^63", version, v, v1, err)
			}
			if _, again, _ := st.Get(ctx, key); again != v1 {
				t.Fatalf("Get of the same row again = version %d, first %d", again, v1)
			}
			if _, err := db.ExecContext(ctx, "UPDATE "+uncheckedTable+" SET value = 'changed' WHERE k = ?", key); err != nil {
				t.Fatal(err)
			}
			_, v2, err := st.Get(ctx, key)
			if err != nil || v2 == v1 || v2 < 1<<63 {
				t.Fatalf("Get after the row changed = version %d, %v; want a foreign version other than %d", v2, err, v1)
			}
			_, err = st.CompareAndSwap(ctx, key, v1, []byte("x"), time.Minute)
			if ce, ok := errors.AsType[*driver.ConflictError](err); !ok || ce.Version != v2 || string(ce.Value) != "changed" {
				t.Fatalf("CompareAndSwap with the row's old version = %v; want a conflict naming %d", err, v2)
			}
			if err := st.CompareAndDelete(ctx, key, v1); !errors.Is(err, driver.ErrConflict) {
				t.Fatalf("CompareAndDelete with the row's old version = %v; want a conflict", err)
			}
			_, err = st.CompareAndSwap(ctx, key, driver.NoVersion, []byte("x"), time.Minute)
			if ce, ok := errors.AsType[*driver.ConflictError](err); !ok || ce.Version != v2 {
				t.Fatalf("create over the row = %v; want a conflict naming %d", err, v2)
			}
			nv, err := st.CompareAndSwap(ctx, key, v2, []byte("x"), time.Minute)
			if err != nil || nv >= 1<<63 {
				t.Fatalf("CompareAndSwap with the row's version = %d, %v; want a record's version", nv, err)
			}
			if got, ver, err := st.Get(ctx, key); err != nil || string(got) != "x" || ver != nv {
				t.Fatalf("Get after the replacing write = %q, %d, %v; want \"x\", %d", got, ver, err, nv)
			}
			// The delete of such a row, by its version.
			if err := plantVersion(ctx, db, key, []byte("gone"), version); err != nil {
				t.Fatal(err)
			}
			if err := st.CompareAndDelete(ctx, key, mustGet(t, st, key)); err != nil {
				t.Fatalf("CompareAndDelete with the row's version = %v", err)
			}
			if _, _, err := st.Get(ctx, key); !errors.Is(err, driver.ErrNotFound) {
				t.Fatalf("Get after the delete = %v; want not found", err)
			}
			// A record's version never names a foreign row: the row's
			// version is not compared as a number.
			if err := plantVersion(ctx, db, key, []byte("g"), version); err != nil {
				t.Fatal(err)
			}
			if _, err := st.CompareAndSwap(ctx, key, driver.Version(uint64(version)), []byte("x"), time.Minute); version != 0 && !errors.Is(err, driver.ErrConflict) {
				t.Fatalf("CompareAndSwap naming version %d as a number = %v; want a conflict", version, err)
			}
		})
	}
}

// TestBreakerOpensOverForeignVersion: a Breaker whose host's row has a
// version of 0 or below (a record or not) replaces the row and opens the
// circuit, with one writer.
func TestBreakerOpensOverForeignVersion(t *testing.T) {
	ctx := t.Context()
	st, db := newUnchecked(t)
	prefix := uniquePrefix(t)
	b, err := kvbreaker.New(isolate(t, st, prefix), kvbreaker.Settings{FailureThreshold: 2, FailureWindow: time.Minute, RecoveryDelay: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	for _, version := range []int64{0, -5} {
		host := fmt.Sprintf("v%d.example", version)
		if err := plantVersion(ctx, db, prefix+host, []byte("garbage"), version); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if err := b.Failure(ctx, host); err != nil {
				t.Fatalf("version %d: Failure %d = %v", version, i+1, err)
			}
		}
		if s, err := b.Inspect(ctx, host); err != nil || s.State != kvbreaker.StateOpen {
			t.Fatalf("version %d: after 2 failures Inspect = %+v, %v; want open", version, s, err)
		}
	}
}
