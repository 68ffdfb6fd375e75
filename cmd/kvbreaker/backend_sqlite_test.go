package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/sqlite"
)

// TestSQLiteBackend: init creates the file (and says so the second time it
// finds it), then list, inspect, reset and check with --backend sqlite,
// the path from the flag or from $KVBREAKER_SQLITE_PATH; a command other
// than init on a missing file fails naming it, and creates nothing.
func TestSQLiteBackend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.db")
	code, _, errOut := runT(t, "inspect", "--backend", "sqlite", "x.example")
	if code == exitOK || !strings.Contains(errOut, "--backend sqlite needs --sqlite-path (or $KVBREAKER_SQLITE_PATH)") {
		t.Errorf("inspect without a path: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut := runT(t, "init", "--backend", "sqlite", "--sqlite-path", path)
	if code != exitOK || !strings.Contains(out, "created the tables") {
		t.Fatalf("init: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = runT(t, "init", "--backend", "sqlite", "--sqlite-path", path)
	if code != exitOK || !strings.Contains(out, "left as it is") {
		t.Errorf("init again: exit %d\n%s", code, out)
	}
	st, err := sqlite.Open(t.Context(), path, sqlite.WithCreate(false))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	backendScenario{
		backend: "sqlite",
		store:   st,
		flags:   []string{"--sqlite-path", path},
		env:     map[string]string{"KVBREAKER_SQLITE_PATH": path},
	}.run(t)

	missing := filepath.Join(t.TempDir(), "typo.db")
	code, _, errOut = runT(t, "inspect", "--backend", "sqlite", "--sqlite-path", missing, "x.example")
	if code != exitFail || !strings.Contains(errOut, missing+": no such database file") {
		t.Errorf("inspect on a missing file: exit %d, stderr %q", code, errOut)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("inspect created %s", missing)
	}
	code, out, _ = runT(t, "init", "--backend", "sqlite", "--print")
	if code != exitOK || !strings.Contains(out, "PRAGMA journal_mode = WAL;") || !strings.Contains(out, "CREATE TABLE IF NOT EXISTS kvbreaker (") {
		t.Errorf("init --print: exit %d\n%s", code, out)
	}
}
