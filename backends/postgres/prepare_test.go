package postgres_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
)

// TestPrepareSaysWhatItDid: Prepare creates a missing table, finds it the
// second time, adds the trigger to a table that lost it, and refuses
// another program's table of the same name (ErrForeignTable) without
// adding a trigger to it.
func TestPrepareSaysWhatItDid(t *testing.T) {
	pool := newPool(t, server.URL())
	ctx := t.Context()
	name := fmt.Sprintf("prep_%d", prefixSeq.Add(1))
	t.Cleanup(func() {
		_, _ = pool.Exec(ctx, "DROP TABLE IF EXISTS "+name+", "+name+"_other CASCADE; DROP SEQUENCE IF EXISTS "+name+"_version")
	})
	for i, want := range []postgres.Prepared{{}, {Existed: true}} {
		got, err := postgres.Prepare(ctx, pool, name)
		if err != nil || got.Existed != want.Existed || got.AddedTrigger {
			t.Fatalf("Prepare #%d = %+v, %v; want %+v", i+1, got, err, want)
		}
	}
	if _, err := pool.Exec(ctx, "DROP TRIGGER "+name+"_notify ON "+name); err != nil {
		t.Fatal(err)
	}
	if got, err := postgres.Prepare(ctx, pool, name); err != nil || !got.Existed || !got.AddedTrigger {
		t.Fatalf("Prepare without the trigger = %+v, %v; want it added", got, err)
	}

	other := name + "_other"
	if _, err := pool.Exec(ctx, "CREATE TABLE "+other+" (id int)"); err != nil {
		t.Fatal(err)
	}
	got, err := postgres.Prepare(ctx, pool, other)
	if !errors.Is(err, postgres.ErrForeignTable) || got.AddedTrigger {
		t.Fatalf("Prepare on another program's table = %+v, %v; want ErrForeignTable", got, err)
	}
	var triggers int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal", other).Scan(&triggers); err != nil || triggers != 0 {
		t.Errorf("another program's table has %d triggers (%v), want none", triggers, err)
	}
}
