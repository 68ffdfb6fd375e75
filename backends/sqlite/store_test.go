package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/sqlite"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/internal/fleettest"
	"github.com/kvbreaker/kvbreaker/skew"
)

// TestBreakerFleetOverSQLite: 64 workers, each with a Store of its own (its
// own connections to the file, as a separate process has), share one
// host's record through a circuit's life with 64 calls at a time
// (fleettest.Cycle): 64 concurrent failures open it exactly once, and each
// restraint elects exactly one probe among 64 concurrent asks.
func TestBreakerFleetOverSQLite(t *testing.T) {
	path := tempDB(t)
	prefix := uniquePrefix(t)
	stores := make([]driver.Store, 64)
	for i := range stores {
		stores[i] = isolate(t, open(t, path), prefix)
	}
	fleettest.New(t, stores, kvbreaker.Settings{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: 10 * time.Minute}).
		Cycle(t, "inbox.example", 64)
}

// TestDefaultTraits: a Store with default options declares DefaultTraits,
// and skew's profile of this backend declares the same.
func TestDefaultTraits(t *testing.T) {
	s := open(t, tempDB(t))
	if got, want := s.Traits(), sqlite.DefaultTraits(); got != want {
		t.Errorf("Traits() with default options = %+v, but DefaultTraits() = %+v", got, want)
	}
	if got, want := sqlite.DefaultTraits(), skew.SQLite.Traits; got != want {
		t.Errorf("sqlite.DefaultTraits() = %+v, but skew.SQLite declares %+v: update the profile", got, want)
	}
	if got := open(t, tempDB(t), sqlite.WithPurgeDelay(time.Hour)).Traits().MaxClockSkew; got != time.Hour {
		t.Errorf("MaxClockSkew with WithPurgeDelay(1h) = %v", got)
	}
}

// TestOptionErrors: every invalid argument is reported at once, each a
// *driver.OptionError, and no file is created.
func TestOptionErrors(t *testing.T) {
	_, err := sqlite.Open(t.Context(), "", sqlite.WithPurgeBatch(0), sqlite.WithPurgeEvery(-1), sqlite.WithPurgeDelay(0),
		sqlite.WithCallTimeout(-time.Second), sqlite.WithBusyTimeout(time.Microsecond), sqlite.WithClock(nil), sqlite.WithFollowPoll(0))
	for _, want := range []string{
		`sqlite: invalid path: ""`, "sqlite: invalid WithPurgeBatch: 0", "sqlite: invalid WithPurgeEvery: -1",
		"sqlite: invalid WithPurgeDelay: 0s", "sqlite: invalid WithCallTimeout: -1s", "sqlite: invalid WithBusyTimeout: 1µs",
		"sqlite: invalid WithClock: nil", "sqlite: invalid WithFollowPoll: 0s",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open = %v, want it to say %q", err, want)
		}
	}
	if _, ok := errors.AsType[*driver.OptionError](err); !ok {
		t.Errorf("Open = %T, want *driver.OptionError inside", err)
	}
}

// TestFileErrors: a missing file (or directory), a file that is no
// database, a database without the store's tables, and a file whose
// write lock another connection holds past the busy timeout each give a
// *FileError matching its kind and naming the path.
func TestFileErrors(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	want := func(t *testing.T, err error, kind error, path string) {
		t.Helper()
		fe, ok := errors.AsType[*sqlite.FileError](err)
		if !ok || !errors.Is(err, kind) || fe.Path != path {
			t.Fatalf("got %v (%T), want a *FileError matching %v naming %s", err, err, kind, path)
		}
		t.Log(err)
	}
	t.Run("missing", func(t *testing.T) {
		p := filepath.Join(dir, "missing.db")
		_, err := sqlite.Open(ctx, p, sqlite.WithCreate(false))
		want(t, err, sqlite.ErrFileMissing, p)
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Open with WithCreate(false) created %s", p)
		}
		p = filepath.Join(dir, "no-such-dir", "x.db")
		_, err = sqlite.Open(ctx, p)
		want(t, err, sqlite.ErrFileMissing, p)
	})
	t.Run("corrupt", func(t *testing.T) {
		p := filepath.Join(dir, "garbage.db")
		if err := os.WriteFile(p, []byte(strings.Repeat("not a database ", 1000)), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := sqlite.Open(ctx, p)
		want(t, err, sqlite.ErrFileCorrupt, p)
	})
	t.Run("not a store", func(t *testing.T) {
		p := filepath.Join(dir, "other.db")
		s := open(t, p)
		if _, err := s.DB().ExecContext(ctx, "DROP TABLE kvbreaker"); err != nil {
			t.Fatal(err)
		}
		_, err := sqlite.Open(ctx, p, sqlite.WithCreate(false))
		want(t, err, sqlite.ErrNotStore, p)
	})
	t.Run("locked", func(t *testing.T) {
		p := filepath.Join(dir, "locked.db")
		holder := open(t, p)
		s := open(t, p, sqlite.WithBusyTimeout(100*time.Millisecond))
		tx, err := holder.DB().BeginTx(ctx, nil) // BEGIN IMMEDIATE: the write lock
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback() //nolint:errcheck
		_, err = s.CompareAndSwap(ctx, "a.example", driver.NoVersion, []byte("x"), time.Hour)
		want(t, err, sqlite.ErrFileLocked, p)
		if oe, ok := errors.AsType[*driver.OpError](err); !ok || oe.Op != "compare-and-swap" || oe.Key != "a.example" {
			t.Errorf("got %v, want a *driver.OpError of compare-and-swap a.example around it", err)
		}
		// Readers do not wait for the writer (WAL).
		if _, _, err := s.Get(ctx, "a.example"); !errors.Is(err, driver.ErrNotFound) {
			t.Errorf("Get while another connection writes = %v, want not found at once", err)
		}
	})
}

// TestWAL: the file is in WAL mode once opened, for every process that
// opens it after.
func TestWAL(t *testing.T) {
	s := open(t, tempDB(t))
	var mode string
	if err := s.DB().QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
}

// TestPurgeBatches: expired rows and tombstones whose purge delay has
// passed are deleted in batches of WithPurgeBatch, oldest first; live
// rows and rows still within the delay stay.
func TestPurgeBatches(t *testing.T) {
	ctx := t.Context()
	clk := newFakeClock()
	s := open(t, tempDB(t), sqlite.WithClock(clk.Now), sqlite.WithPurgeEvery(0), sqlite.WithPurgeBatch(10), sqlite.WithPurgeDelay(time.Minute))
	for i := range 25 {
		if _, err := s.CompareAndSwap(ctx, fmt.Sprintf("gone-%02d", i), driver.NoVersion, []byte("x"), time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		k := fmt.Sprintf("deleted-%d", i)
		v, err := s.CompareAndSwap(ctx, k, driver.NoVersion, []byte("x"), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CompareAndDelete(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if _, err := s.CompareAndSwap(ctx, fmt.Sprintf("live-%d", i), driver.NoVersion, []byte("x"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(30 * time.Second) // expired, but within the purge delay
	if n, err := s.Purge(ctx); err != nil || n != 0 {
		t.Fatalf("Purge within the delay = %d, %v; want 0", n, err)
	}
	clk.Advance(time.Minute)
	var got []int64
	for range 4 {
		n, err := s.Purge(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
	}
	if fmt.Sprint(got) != "[10 10 10 0]" {
		t.Errorf("purged %v per batch, want [10 10 10 0] (30 rows)", got)
	}
	var n int
	if err := s.DB().QueryRowContext(ctx, "SELECT count(*) FROM kvbreaker").Scan(&n); err != nil || n != 3 {
		t.Errorf("%d rows left (%v), want the 3 live ones", n, err)
	}
}

// TestPurgeEveryWrites: with WithPurgeEvery(n), the n-th write starts a
// purge in the background; Close waits for it.
func TestPurgeEveryWrites(t *testing.T) {
	ctx := t.Context()
	clk := newFakeClock()
	path := tempDB(t)
	s, err := sqlite.Open(ctx, path, sqlite.WithClock(clk.Now), sqlite.WithPurgeEvery(5), sqlite.WithPurgeDelay(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := s.CompareAndSwap(ctx, fmt.Sprintf("gone-%d", i), driver.NoVersion, []byte("x"), time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Second)
	if _, err := s.CompareAndSwap(ctx, "live", driver.NoVersion, []byte("x"), time.Hour); err != nil {
		t.Fatal(err)
	}
	s.Close()
	r := open(t, path)
	var n int
	if err := r.DB().QueryRowContext(ctx, "SELECT count(*) FROM kvbreaker").Scan(&n); err != nil || n != 1 {
		t.Errorf("%d rows after the fifth write's purge (%v), want 1", n, err)
	}
}

// TestList: live keys under a prefix, in order, paginated by key; expired
// and deleted ones are not listed.
func TestList(t *testing.T) {
	clk := newFakeClock()
	st := isolate(t, open(t, tempDB(t), sqlite.WithClock(clk.Now)), uniquePrefix(t))
	backendtest.LiveListing(t, st, time.Millisecond, func() { clk.Advance(time.Second) })
}

// TestContextEndedDuringWait: a write waiting for another connection's
// write lock ends with its context, before the busy timeout, with an
// error matching the context's (not ErrFileLocked).
func TestContextEndedDuringWait(t *testing.T) {
	p := tempDB(t)
	holder := open(t, p)
	s := open(t, p, sqlite.WithBusyTimeout(time.Minute))
	tx, err := holder.DB().BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = s.CompareAndSwap(ctx, "a.example", driver.NoVersion, []byte("x"), time.Hour)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, sqlite.ErrFileLocked) {
		t.Errorf("CompareAndSwap = %v, want the context's deadline", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("took %v, want it to end with its context", took)
	}
}
