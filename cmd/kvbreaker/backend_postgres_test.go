package main

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/internal/testservers/pgtest"
)

// TestPostgresBackend: list, inspect, reset and check with --backend
// postgres against a real server this test starts, the URL from the flag
// or from $KVBREAKER_POSTGRES_URL; a refused port is reported as such.
func TestPostgresBackend(t *testing.T) {
	srv := pgtest.MustStart(t)
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := postgres.CreateTable(ctx, pool, "fleet"); err != nil {
		t.Fatal(err)
	}
	st, err := postgres.New(pool, "fleet")
	if err != nil {
		t.Fatal(err)
	}
	backendScenario{
		backend: "postgres",
		store:   st,
		flags:   []string{"--postgres-url", srv.URL(), "--postgres-table", "fleet"},
		env:     map[string]string{"KVBREAKER_POSTGRES_URL": srv.URL(), "KVBREAKER_POSTGRES_TABLE": "fleet"},
		dead:    func(addr string) []string { return []string{"--postgres-url", srv.URLFor(addr)} },
	}.run(t)
	code, _, errOut := runT(t, "inspect", "--backend", "postgres", "--postgres-url", srv.URL(), "--postgres-table", "missing", "x.example")
	if code != exitFail || !strings.Contains(errOut, "table missing does not exist") {
		t.Errorf("inspect with a missing table: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runT(t, "inspect", "--backend", "postgres", "--postgres-url", "http://x", "x.example")
	if code == exitOK || !strings.Contains(errOut, "want a postgres:// URL") {
		t.Errorf("inspect with an http URL: exit %d, stderr %q", code, errOut)
	}
	// A table another session holds locked: open's read of it and init's
	// wait, and the command gives up at --timeout naming the server; init
	// does not call it a table a store cannot read.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "LOCK TABLE fleet IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"inspect", "x.example"}, {"init"}} {
		code, _, errOut := runT(t, append(args, "--timeout", "1s", "--backend", "postgres", "--postgres-url", srv.URL(), "--postgres-table", "fleet")...)
		if want := "Error: cannot reach postgres at " + srv.Addr() + ": no answer within --timeout 1s"; code != exitFail || !strings.Contains(errOut, want) {
			t.Errorf("%s on a locked table: exit %d, stderr %q; want %q", args[0], code, errOut, want)
		}
	}
}
