package main

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/mysql"
	"github.com/kvbreaker/kvbreaker/internal/testservers/mariadbtest"
)

// TestMySQLBackend: list, inspect, reset and check with --backend mysql
// against a real MariaDB this test starts, the DSN from the flag or from
// $KVBREAKER_MYSQL_DSN; a refused port is reported as such; a missing
// table is named with how to create it; init creates the table, says so,
// and leaves an existing one alone.
func TestMySQLBackend(t *testing.T) {
	srv := mariadbtest.MustStart(t)
	db, err := sql.Open("mysql", srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	code, out, errOut := runT(t, "list", "--backend", "mysql", "--mysql-dsn", srv.DSN(), "--mysql-table", "fleet")
	if code != exitFail || !strings.Contains(errOut, "table fleet does not exist") || !strings.Contains(errOut, `"kvbreaker init" and the same flags`) {
		t.Fatalf("list on a missing table: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runT(t, "init", "--backend", "mysql", "--mysql-dsn", srv.DSN(), "--mysql-table", "fleet")
	if code != exitOK || !strings.Contains(out, "mysql table fleet in database kvbreaker at "+srv.Addr()+": created") {
		t.Fatalf("init: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = runT(t, "init", "--backend", "mysql", "--mysql-dsn", srv.DSN(), "--mysql-table", "fleet")
	if code != exitOK || !strings.Contains(out, "exists already; nothing changed") {
		t.Errorf("init again: exit %d, stdout %q", code, out)
	}
	st, err := mysql.New(db, "fleet")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	backendScenario{
		backend: "mysql",
		store:   st,
		flags:   []string{"--mysql-dsn", srv.DSN(), "--mysql-table", "fleet"},
		env:     map[string]string{"KVBREAKER_MYSQL_DSN": srv.DSN(), "KVBREAKER_MYSQL_TABLE": "fleet"},
		dead:    func(addr string) []string { return []string{"--mysql-dsn", srv.DSNFor(addr)} },
	}.run(t)
	code, _, errOut = runT(t, "inspect", "--backend", "mysql", "--mysql-dsn", srv.DSN(), "--mysql-table", "missing", "x.example")
	if code != exitFail || !strings.Contains(errOut, "table missing does not exist") {
		t.Errorf("inspect with a missing table: exit %d, stderr %q", code, errOut)
	}
	secret := "app:s3cretpw@tcp(" + srv.Addr() + ")/kvbreaker"
	code, _, errOut = runT(t, "inspect", "--backend", "mysql", "--mysql-dsn", secret, "x.example")
	if code != exitFail || strings.Contains(errOut, "s3cretpw") || !strings.Contains(errOut, `refused user "app"`) {
		t.Errorf("inspect with a wrong user: exit %d, stderr %q (want the refusal, without the password)", code, errOut)
	}
	code, _, errOut = runT(t, "inspect", "--backend", "mysql", "--mysql-dsn", "mysql://app:s3cretpw@db/app", "x.example")
	if code == exitOK || strings.Contains(errOut, "s3cretpw") || !strings.Contains(errOut, "is a URL") {
		t.Errorf("inspect with a URL: exit %d, stderr %q", code, errOut)
	}
	code, out, _ = runT(t, "init", "--backend", "mysql", "--mysql-table", "fleet", "--print")
	if code != exitOK || !strings.Contains(out, "CREATE TABLE IF NOT EXISTS `fleet`") {
		t.Errorf("init --print: exit %d, stdout %q", code, out)
	}
	// A table another session holds locked: open's read of it and init's
	// wait, and the command gives up at --timeout naming the server; init
	// does not call it a table a store cannot read.
	lock, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(t.Context(), "LOCK TABLES fleet WRITE"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"inspect", "x.example"}, {"init"}} {
		code, _, errOut := runT(t, append(args, "--timeout", "1s", "--backend", "mysql", "--mysql-dsn", srv.DSN(), "--mysql-table", "fleet")...)
		if want := "Error: cannot reach mysql at " + srv.Addr() + ": no answer within --timeout 1s"; code != exitFail || !strings.Contains(errOut, want) {
			t.Errorf("%s on a locked table: exit %d, stderr %q; want %q", args[0], code, errOut, want)
		}
	}
}
