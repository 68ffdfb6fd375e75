package mysql_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/mysql"
)

// TestPrepareSaysWhatItDid: Prepare creates a missing table, finds it the
// second time, and refuses another program's table of the same name
// (ErrForeignTable).
func TestPrepareSaysWhatItDid(t *testing.T) {
	db := newDB(t, server.DSN())
	ctx := t.Context()
	name := fmt.Sprintf("prep_%d", prefixSeq.Add(1))
	t.Cleanup(func() { _, _ = db.ExecContext(ctx, "DROP TABLE IF EXISTS "+name+", "+name+"_other") })
	for i, want := range []mysql.Prepared{{}, {Existed: true}} {
		got, err := mysql.Prepare(ctx, db, name)
		if err != nil || got.Existed != want.Existed {
			t.Fatalf("Prepare #%d = %+v, %v; want %+v", i+1, got, err, want)
		}
	}
	other := name + "_other"
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+other+" (id int)"); err != nil {
		t.Fatal(err)
	}
	if got, err := mysql.Prepare(ctx, db, other); !errors.Is(err, mysql.ErrForeignTable) || !got.Existed {
		t.Fatalf("Prepare on another program's table = %+v, %v; want ErrForeignTable", got, err)
	}
}
