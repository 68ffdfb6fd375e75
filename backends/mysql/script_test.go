package mysql_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/mysql"
)

// TestSchemaScriptMakesAStoresTable: the script, run as the mysql client
// would run it, makes a table Prepare finds and a Store reads; its
// comments name the grants. An invalid name is Schema's error.
func TestSchemaScriptMakesAStoresTable(t *testing.T) {
	db := newDB(t, server.DSN())
	ctx := t.Context()
	name := fmt.Sprintf("script_%d", prefixSeq.Add(1))
	t.Cleanup(func() { _, _ = db.ExecContext(ctx, "DROP TABLE IF EXISTS "+name) })
	script, err := mysql.SchemaScript(name)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(script, "SELECT, INSERT, UPDATE, DELETE") || !strings.HasPrefix(script, "-- ") {
		t.Errorf("script lacks its comments on grants:\n%s", script)
	}
	if _, err := db.ExecContext(ctx, script); err != nil {
		t.Fatalf("running the script: %v", err)
	}
	if got, err := mysql.Prepare(ctx, db, name); err != nil || got != (mysql.Prepared{Existed: true}) {
		t.Fatalf("Prepare after the script = %+v, %v; want the table found", got, err)
	}
	s, err := mysql.New(db, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping on the script's table: %v", err)
	}
	if _, err := mysql.SchemaScript("Upper"); err == nil {
		t.Error("SchemaScript accepted an upper-case name")
	}
}
