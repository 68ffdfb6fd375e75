package sqlite_test

import (
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/sqlite"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestSchemaScriptMakesAStoresFile: a file the script ran in is in WAL mode
// and opens without creating anything (WithCreate(false)); a database
// without the script's tables does not, so the script is what made it a
// store's.
func TestSchemaScriptMakesAStoresFile(t *testing.T) {
	ctx := t.Context()
	for _, script := range []string{sqlite.SchemaScript, ""} {
		path := filepath.Join(t.TempDir(), "script.db")
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, script+"CREATE TABLE IF NOT EXISTS other (x INTEGER);"); err != nil {
			t.Fatalf("running the script: %v", err)
		}
		var mode string
		if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		db.Close()
		s, err := sqlite.Open(ctx, path, sqlite.WithCreate(false))
		if script == "" {
			if err == nil {
				s.Close()
				t.Fatal("Open(WithCreate(false)) took a file without the script's tables")
			}
			continue
		}
		if err != nil || mode != "wal" {
			t.Fatalf("after the script: journal_mode %q, Open: %v; want wal and a store", mode, err)
		}
		if _, _, err := s.Get(ctx, "x"); !errors.Is(err, driver.ErrNotFound) {
			t.Errorf("Get of a missing key on the script's file: %v, want ErrNotFound", err)
		}
		s.Close()
	}
}
