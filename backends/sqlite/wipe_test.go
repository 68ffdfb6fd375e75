package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	msqlite "modernc.org/sqlite"

	"github.com/kvbreaker/kvbreaker/backends/sqlite"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/internal/wipetest"
)

// TestFollowSeesWipes: another program (a connection of the test's own,
// through SQLite, not a Store) changes the file behind the stores' back:
// it deletes every row, deletes one, restores a backup taken before the
// last write into the live file, or moves another file onto its path.
// Every time the feed reports it (Lost, or a Delete of the key) before
// any Synced whose At is after the change, so a mirror never vouches for a
// record the file no longer has.
func TestFollowSeesWipes(t *testing.T) {
	const key = "wiped/host.example"
	wipes := map[string]func(t *testing.T, path, backup string) error{
		"every row deleted": func(t *testing.T, path, _ string) error {
			return sqlExec(t, path, "DELETE FROM kvbreaker")
		},
		"one row deleted": func(t *testing.T, path, _ string) error {
			return sqlExec(t, path, "DELETE FROM kvbreaker WHERE key = ?", key)
		},
		"backup restored": func(t *testing.T, path, backup string) error {
			return restore(t, path, backup)
		},
		"backup restored, then a write": func(t *testing.T, path, backup string) error {
			if err := restore(t, path, backup); err != nil {
				return err
			}
			return sqlExec(t, path, "UPDATE kvbreaker_meta SET value = value + 1000000000 WHERE name = 'version'")
		},
		"file replaced": func(t *testing.T, path, backup string) error {
			return os.Rename(backup, path)
		},
	}
	for name, wipe := range wipes {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			path := tempDB(t)
			st := open(t, path)
			backup := filepath.Join(t.TempDir(), "backup.db")
			if _, err := st.CompareAndSwap(ctx, "wiped/other.example", driver.NoVersion, []byte("record"), time.Hour); err != nil {
				t.Fatal(err)
			}
			if err := sqlExec(t, path, "VACUUM INTO ?", backup); err != nil {
				t.Fatal(err)
			}
			if _, err := st.CompareAndSwap(ctx, key, driver.NoVersion, []byte("record"), time.Hour); err != nil {
				t.Fatal(err)
			}
			f := backendtest.Follow(t, ctx, st, "wiped/", 100*time.Millisecond)
			f.AwaitSyncedWith(t, key)
			if err := wipe(t, path, backup); err != nil {
				t.Fatalf("the change: %v", err)
			}
			c := f.AwaitWipeSeen(t, key, time.Now())
			t.Logf("seen as %v (%v)", c.Kind, c.Err)
		})
	}
}

// TestPurgeIsNoWipe: the store's own purge, and check's cleanup, delete
// rows without a follower taking it for another program's deletes.
func TestPurgeIsNoWipe(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	clock := newFakeClock()
	st := open(t, tempDB(t), sqlite.WithClock(clock.Now), sqlite.WithPurgeEvery(0))
	lost := make(chan error, 16)
	synced := make(chan time.Time, 1024)
	fctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- st.Follow(fctx, "p/", 20*time.Millisecond, func(c driver.Change) {
			switch c.Kind {
			case driver.ChangeLost:
				lost <- c.Err
			case driver.ChangeSynced:
				synced <- c.At
			}
		})
	}()
	defer func() {
		stop()
		<-done
	}()
	for _, k := range []string{"p/a", "p/b", "q/c"} {
		if _, err := st.CompareAndSwap(ctx, k, driver.NoVersion, []byte("v"), time.Second); err != nil {
			t.Fatal(err)
		}
	}
	written := time.Now()
	for at := range synced {
		if at.After(written) {
			break
		}
	}
	clock.Advance(time.Hour)
	n, err := st.Purge(ctx)
	if err != nil || n != 3 {
		t.Fatalf("Purge = %d, %v; want 3 rows", n, err)
	}
	purged := time.Now()
	for {
		select {
		case err := <-lost:
			t.Fatalf("the store's purge was reported as Lost: %v", err)
		case at := <-synced:
			if at.After(purged) {
				return
			}
		case <-ctx.Done():
			t.Fatal("no Synced after the purge")
		}
	}
}

// restore restores backup into the file at path through SQLite's backup
// API, as the sqlite3 shell's .restore does.
func restore(t *testing.T, path, backup string) error {
	return restoreInto(t.Context(), rawDB(t, path), backup)
}

// restoreInto restores backup into db's file.
func restoreInto(ctx context.Context, db *sql.DB, backup string) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		r, err := dc.(interface {
			NewRestore(string) (*msqlite.Backup, error)
		}).NewRestore(backup)
		if err != nil {
			return err
		}
		if _, err := r.Step(-1); err != nil {
			r.Finish()
			return err
		}
		return r.Finish()
	})
}

// rawDB opens path with SQLite alone, as another program would.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// sqlExec runs a statement on path as another program would.
func sqlExec(t *testing.T, path, stmt string, args ...any) error {
	t.Helper()
	_, err := rawDB(t, path).ExecContext(t.Context(), stmt, args...)
	if errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	return err
}

// wiping is the conformance harness with the Wiper capability: another
// program, on a connection of its own, deletes every row, or restores into
// the live file a backup taken before any case wrote (the file replaced by
// a rename is left to TestFollowSeesWipes: the harness's own store keeps
// the old file open).
type wiping struct {
	*harness
	backup string
	db     *sql.DB // SQLite alone, as another program has it
}

func newWipingHarness(ctx context.Context, t *testing.T) (conformance.Harness, error) {
	h, err := harnessAt(ctx, tempDB(t))
	if err != nil {
		return nil, err
	}
	w := &wiping{harness: h, backup: filepath.Join(t.TempDir(), "backup.db"), db: rawDB(t, h.path)}
	if _, err := w.db.ExecContext(ctx, "VACUUM INTO ?", w.backup); err != nil {
		h.Close()
		return nil, err
	}
	return w, nil
}

func (w *wiping) Wipes() []string { return []string{"DELETE FROM", "backup restored"} }

func (w *wiping) Wipe(ctx context.Context, _ driver.Store, how string) error {
	switch how {
	case "DELETE FROM":
		_, err := w.db.ExecContext(ctx, "DELETE FROM kvbreaker")
		return err
	case "backup restored":
		return restoreInto(ctx, w.db, w.backup)
	}
	return fmt.Errorf("wipe: no way %q", how)
}

// TestFollowWipeBlind: follow-wipe's negative control on the real file: the
// same harness, its feeds blind to what the deletes and the restore make
// them say, fails the case.
func TestFollowWipeBlind(t *testing.T) {
	h, err := newWipingHarness(t.Context(), t)
	if err != nil {
		t.Fatal(err)
	}
	wipetest.CheckBlindFails(t, h.(*wiping))
}
