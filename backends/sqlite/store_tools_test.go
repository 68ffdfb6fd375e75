package sqlite_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/sqlite"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestPurgeKeyRemovesTheTombstoneUnseenByFollowers: PurgeKey removes the
// row a CompareAndDelete left, counts it once, and leaves the count of
// deletes the schema's trigger keeps (which followers read as another
// program's wipe) as it was; a raw DELETE, the negative control, moves it.
func TestPurgeKeyRemovesTheTombstoneUnseenByFollowers(t *testing.T) {
	ctx := t.Context()
	s := open(t, tempDB(t))
	deleted := func() int64 {
		var n int64
		if err := s.DB().QueryRowContext(ctx, "SELECT value FROM kvbreaker_meta WHERE name = 'deleted'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, key := range []string{"a.example", "b.example"} {
		v, err := s.CompareAndSwap(ctx, key, driver.NoVersion, []byte("x"), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CompareAndDelete(ctx, key, v); err != nil {
			t.Fatal(err)
		}
	}
	before := deleted()
	for want := int64(1); want >= 0; want-- {
		n, err := s.PurgeKey(ctx, "a.example")
		if err != nil || n != want {
			t.Fatalf("PurgeKey = %d, %v; want %d", n, err, want)
		}
	}
	if after := deleted(); after != before {
		t.Errorf("PurgeKey moved the trigger's count of deletes from %d to %d", before, after)
	}
	if _, _, err := s.Get(ctx, "a.example"); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("Get after PurgeKey: %v, want ErrNotFound", err)
	}
	if _, err := s.DB().ExecContext(ctx, "DELETE FROM kvbreaker WHERE key = 'b.example'"); err != nil {
		t.Fatal(err)
	}
	if deleted() == before {
		t.Error("a raw DELETE left the count as it was: the check above proves nothing")
	}
}

// TestInitCreatesOnce: Init makes the file and says so, then finds it and
// says so; a file that is no SQLite database is an error, not created. The
// Store over it names its file.
func TestInitCreatesOnce(t *testing.T) {
	path := tempDB(t)
	for _, want := range []struct {
		created bool
		says    string
	}{
		{true, "created the tables kvbreaker and kvbreaker_meta in " + path + " (WAL mode)"},
		{false, path + " already holds the tables kvbreaker and kvbreaker_meta: left as it is"},
	} {
		i, err := sqlite.Init(t.Context(), path)
		if err != nil || i.Created != want.created || i.String() != want.says {
			t.Fatalf("Init = %+v (%q), %v; want Created %v, %q", i, i, err, want.created, want.says)
		}
	}
	s := open(t, path) // the store opens what Init made
	if got := s.String(); got != "sqlite file "+path {
		t.Errorf("Store.String() = %q, want %q", got, "sqlite file "+path)
	}
	junk := filepath.Join(t.TempDir(), "junk.db")
	if err := os.WriteFile(junk, []byte(strings.Repeat("not a database ", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	if i, err := sqlite.Init(t.Context(), junk); err == nil || i.Created {
		t.Errorf("Init on a file that is no database: %+v, %v; want an error", i, err)
	}
}
