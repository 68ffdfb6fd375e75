package mysql_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/kvbreaker/kvbreaker/backends/mysql"
	"github.com/kvbreaker/kvbreaker/internal/testservers/mariadbtest"
)

// TestPreparedSaysWhatItDid: Prepared's words name the index Prepare made
// (as the server has it) the first time, and that it found the table the
// second time.
func TestPreparedSaysWhatItDid(t *testing.T) {
	db := newDB(t, server.DSN())
	ctx := t.Context()
	name := fmt.Sprintf("said_%d", prefixSeq.Add(1))
	t.Cleanup(func() { _, _ = db.ExecContext(ctx, "DROP TABLE IF EXISTS "+name) })
	p, err := mysql.Prepare(ctx, db, name)
	var n int
	if err == nil {
		err = db.QueryRowContext(ctx, "SELECT count(*) FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ? AND index_name = 'purge_at'", name).Scan(&n)
	}
	if err != nil || n == 0 || p.String() != "created (with index purge_at)" {
		t.Fatalf("first Prepare says %q (%v); the server has index purge_at: %v", p, err, n > 0)
	}
	if p, err := mysql.Prepare(ctx, db, name); err != nil || p.String() != "exists already; nothing changed (the store reads it)" {
		t.Errorf("second Prepare: %q, %v", p, err)
	}
}

// TestPrepareCreateDenied: a user that may read the database but not
// create in it gets a *CreateDeniedError that names it, the table and the
// grants, and unwraps to the server's refusal.
func TestPrepareCreateDenied(t *testing.T) {
	admin := newDB(t, server.DSN())
	ctx := t.Context()
	user := fmt.Sprintf("nocreate_%d", prefixSeq.Add(1))
	for _, q := range []string{"CREATE USER '" + user + "'@'%'", "GRANT SELECT ON " + mariadbtest.Database + ".* TO '" + user + "'@'%'"} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	_, err := mysql.Prepare(ctx, newDB(t, user+"@tcp("+server.Addr()+")/"+mariadbtest.Database), "denied")
	de, ok := errors.AsType[*mysql.CreateDeniedError](err)
	me, _ := errors.AsType[*gomysql.MySQLError](err)
	if !ok || de.User != user || me == nil || me.Number != 1142 ||
		!strings.Contains(err.Error(), `user "`+user+`" may not create table denied`) ||
		!strings.Contains(err.Error(), "grant the user SELECT, INSERT, UPDATE, DELETE on it") {
		t.Fatalf("Prepare as a user without CREATE: %v; want a *CreateDeniedError naming the user and the grants", err)
	}
	// The store's Prepare names WithCreateScript's script, not SchemaScript.
	s, err := mysql.Dial(ctx, user+"@tcp("+server.Addr()+")/"+mariadbtest.Database, "denied", mysql.WithCreateScript("what a tool prints"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Prepare(ctx); !strings.Contains(fmt.Sprint(err), "administrator run what a tool prints, and grant") {
		t.Errorf("Store.Prepare WithCreateScript: %v", err)
	}
	// Negative control: the administrator is not refused.
	t.Cleanup(func() { _, _ = admin.ExecContext(ctx, "DROP TABLE IF EXISTS denied") })
	if _, err := mysql.Prepare(ctx, admin, "denied"); err != nil {
		t.Errorf("Prepare as the administrator: %v", err)
	}
}
