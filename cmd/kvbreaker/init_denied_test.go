package main

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kvbreaker/kvbreaker/internal/testservers/mariadbtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/pgtest"
)

// TestInitCreateDenied: init as a user the server refuses the table says
// who must create it with what init --print shows, and the grants the user
// then needs; as the administrator (the negative control) it creates it.
func TestInitCreateDenied(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		srv := pgtest.MustStart(t)
		pool, err := pgxpool.New(t.Context(), srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		for _, q := range []string{"CREATE ROLE nocreate LOGIN", "REVOKE CREATE ON SCHEMA public FROM PUBLIC"} {
			if _, err := pool.Exec(t.Context(), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		role := strings.Replace(srv.URL(), "postgres://"+pgtest.User+"@", "postgres://nocreate@", 1)
		code, out, errOut := runT(t, "init", "--backend", "postgres", "--postgres-url", role, "--postgres-table", "denied")
		for _, want := range []string{"postgres at " + srv.Addr() + `: user "nocreate" may not create table denied or its trigger (`,
			`have the database or table owner run what "kvbreaker init --backend postgres --postgres-table denied --print" shows, and grant the user SELECT, INSERT, UPDATE, DELETE on it and USAGE on its sequence`} {
			if code != exitFail || !strings.Contains(errOut, want) {
				t.Errorf("init as a role without CREATE: exit %d, stdout %q, stderr %q; want %q", code, out, errOut, want)
			}
		}
		if code, out, errOut := runT(t, "init", "--backend", "postgres", "--postgres-url", srv.URL(), "--postgres-table", "denied"); code != exitOK {
			t.Errorf("init as the administrator: exit %d\n%s%s", code, out, errOut)
		}
	})
	t.Run("mysql", func(t *testing.T) {
		srv := mariadbtest.MustStart(t)
		db, err := sql.Open("mysql", srv.DSN())
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, q := range []string{"CREATE USER 'nocreate'@'%'", "GRANT SELECT ON " + mariadbtest.Database + ".* TO 'nocreate'@'%'"} {
			if _, err := db.ExecContext(t.Context(), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		dsn := "nocreate@tcp(" + srv.Addr() + ")/" + mariadbtest.Database
		code, out, errOut := runT(t, "init", "--backend", "mysql", "--mysql-dsn", dsn, "--mysql-table", "denied")
		for _, want := range []string{"mysql at " + srv.Addr() + `: user "nocreate" may not create table denied (`,
			`have an administrator run what "kvbreaker init --backend mysql --mysql-table denied --print" shows, and grant the user SELECT, INSERT, UPDATE, DELETE on it`} {
			if code != exitFail || !strings.Contains(errOut, want) {
				t.Errorf("init as a user without CREATE: exit %d, stdout %q, stderr %q; want %q", code, out, errOut, want)
			}
		}
		if code, out, errOut := runT(t, "init", "--backend", "mysql", "--mysql-dsn", srv.DSN(), "--mysql-table", "denied"); code != exitOK {
			t.Errorf("init as the administrator: exit %d\n%s%s", code, out, errOut)
		}
	})
}
