package main

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/testservers/pgtest"
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
	prefix := "cli-" + randomHex(4) + "/"
	p, err := kvbreaker.Prefixed(st, prefix)
	if err != nil {
		t.Fatal(err)
	}
	b, err := kvbreaker.New(p, kvbreaker.Settings{FailureThreshold: 2})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := b.Failure(ctx, "down.example"); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"--backend", "postgres", "--postgres-url", srv.URL(), "--postgres-table", "fleet", "--prefix", prefix}

	l := listJSON(t, args...)
	if got := strings.Join(hostNames(l), ","); got != "down.example" {
		t.Errorf("list: hosts %q, want down.example", got)
	}
	code, out, errOut := runT(t, append([]string{"inspect"}, append(args, "down.example")...)...)
	if code != exitOK || !strings.Contains(out, "open") {
		t.Errorf("inspect: exit %d\n%s\n%s", code, out, errOut)
	}
	// The same from the environment.
	t.Setenv("KVBREAKER_POSTGRES_URL", srv.URL())
	t.Setenv("KVBREAKER_POSTGRES_TABLE", "fleet")
	code, out, errOut = runT(t, "reset", "--backend", "postgres", "--prefix", prefix, "--yes", "down.example")
	if code != exitOK {
		t.Errorf("reset: exit %d\n%s\n%s", code, out, errOut)
	}
	if st, err := b.Inspect(ctx, "down.example"); err != nil || st.Found {
		t.Errorf("after reset Inspect = %+v, %v; want no record", st, err)
	}
	code, out, errOut = runT(t, "check", "--backend", "postgres", "--quick", "--quiet", "--timeout", "2m")
	if code != exitOK {
		t.Errorf("check: exit %d\n%s\n%s", code, out, errOut)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	start := time.Now()
	code, out, errOut = runT(t, "inspect", "--backend", "postgres", "--postgres-url", srv.URLFor(dead), "x.example")
	want := "cannot reach postgres at " + dead + ": connection refused"
	if code != exitFail || !strings.Contains(errOut, want) {
		t.Errorf("inspect on a closed port: exit %d, stderr %q, stdout %q; want %q", code, errOut, out, want)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %v to report a closed port", took)
	}
	code, _, errOut = runT(t, "inspect", "--backend", "postgres", "--postgres-url", srv.URL(), "--postgres-table", "missing", "x.example")
	if code != exitFail || !strings.Contains(errOut, "table missing does not exist") {
		t.Errorf("inspect with a missing table: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runT(t, "inspect", "--backend", "postgres", "--postgres-url", "http://x", "x.example")
	if code == exitOK || !strings.Contains(errOut, "want a postgres:// URL") {
		t.Errorf("inspect with an http URL: exit %d, stderr %q", code, errOut)
	}
}
