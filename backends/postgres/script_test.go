package postgres_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
)

// TestSchemaScriptMakesAStoresTable: the script, run as psql would run it,
// makes a table Prepare finds complete (its trigger included) and a Store
// reads; its comments name the grants and the channel. An invalid name is
// Schema's error.
func TestSchemaScriptMakesAStoresTable(t *testing.T) {
	pool := newPool(t, server.URL())
	ctx := t.Context()
	name := fmt.Sprintf("script_%d", prefixSeq.Add(1))
	t.Cleanup(func() {
		_, _ = pool.Exec(ctx, "DROP TABLE IF EXISTS "+name+" CASCADE; DROP SEQUENCE IF EXISTS "+name+"_version")
	})
	script, err := postgres.SchemaScript(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"USAGE on the sequence", "SELECT, INSERT, UPDATE, DELETE", "channel " + postgres.Channel(name) + " "} {
		if !strings.Contains(script, want) {
			t.Errorf("script lacks %q:\n%s", want, script)
		}
	}
	if _, err := pool.Exec(ctx, script); err != nil {
		t.Fatalf("running the script: %v", err)
	}
	if got, err := postgres.Prepare(ctx, pool, name); err != nil || !got.Existed || got.AddedTrigger {
		t.Fatalf("Prepare after the script = %+v, %v; want the table complete", got, err)
	}
	s, err := postgres.New(pool, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping on the script's table: %v", err)
	}
	if _, err := postgres.SchemaScript("Upper"); err == nil {
		t.Error("SchemaScript accepted an upper-case name")
	}
}
