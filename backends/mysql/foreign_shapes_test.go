package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
)

// foreignRows are rows another program, an older version or a hand-made
// fix can leave at a key, as the columns of an upsert. The table's CHECK
// keeps every version positive; expires_at on 9999-12-31 is no expiry.
var foreignRows = []struct {
	name                    string
	value, version, expires string
	writes                  string
}{
	{"not a record", `X'00676172626167650a'`, `42`, `'9999-12-31 23:59:59.999999'`, `''`},
	{"empty value", `''`, `43`, `'9999-12-31 23:59:59.999999'`, `''`},
	{"not a record, expiring", `'garbage'`, `44`, `UTC_TIMESTAMP(6) + INTERVAL 1 HOUR`, `''`},
	{"largest version", `'garbage'`, `9223372036854775807`, `'9999-12-31 23:59:59.999999'`, `''`},
	{"history not of whole ids", `'garbage'`, `45`, `'9999-12-31 23:59:59.999999'`, `X'0102030405'`},
	{"expired, history not of whole ids", `'garbage'`, `46`, `'1000-01-01'`, `X'01020304050607080900'`},
}

// plantForeign stores the named row at key in the shared table, replacing
// what is there.
func plantForeign(ctx context.Context, db *sql.DB, key, shape string) error {
	for _, r := range foreignRows {
		if r.name != shape {
			continue
		}
		_, err := db.ExecContext(ctx, fmt.Sprintf("REPLACE INTO %s (k, value, version, expires_at, purge_at, writes) VALUES (?, %s, %s, %s, '9999-12-31', %s)",
			table, r.value, r.version, r.expires, r.writes), key)
		return err
	}
	return fmt.Errorf("unknown foreign shape %q", shape)
}
