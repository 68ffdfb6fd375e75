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
}
