package postgres_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// foreignRows are rows another process, an older version or a hand-made
// fix can leave at a key, as columns of an upsert (expires_at 'infinity':
// no expiry).
var foreignRows = []struct {
	name                                      string
	value, version, expires, writes, versions string
}{
	{"version 0", `'\000garbage'`, `0`, `'infinity'`, `'{}'`, `'{}'`},
	{"version 0, empty value", `''`, `0`, `'infinity'`, `'{}'`, `'{}'`},
	{"version 0, expiring", `'garbage'`, `0`, `now() + interval '1 hour'`, `'{}'`, `'{}'`},
	{"negative version", `'garbage'`, `-5`, `'infinity'`, `'{}'`, `'{}'`},
	{"least bigint version", `'garbage'`, `-9223372036854775808`, `'infinity'`, `'{}'`, `'{}'`},
	{"valid version, no expiry", `'garbage'`, `42`, `'infinity'`, `'{}'`, `'{}'`},
	{"null in writes", `'garbage'`, `43`, `'infinity'`, `'{NULL,1}'`, `'{43}'`},
	{"expired, null in writes", `'garbage'`, `44`, `'-infinity'`, `'{NULL}'`, `'{NULL}'`},
	{"two-dimensional writes", `'garbage'`, `45`, `'infinity'`, `'{{1,2},{3,4}}'`, `'{{45,45},{45,45}}'`},
	{"expired, two-dimensional writes", `'garbage'`, `46`, `'-infinity'`, `'{{1,2},{3,4}}'`, `'{{1,2},{3,4}}'`},
	{"writes and versions of other lengths", `'garbage'`, `47`, `'infinity'`, `'{1,2,3}'`, `'{}'`},
}

// plantForeign stores the named row at key in the shared table, replacing
// what is there.
func plantForeign(ctx context.Context, pool *pgxpool.Pool, key, shape string) error {
	for _, r := range foreignRows {
		if r.name != shape {
			continue
		}
		_, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %[1]s (key, value, version, expires_at, purge_at, writes, versions)
VALUES ($1, %[2]s, %[3]s, %[4]s, 'infinity', %[5]s, %[6]s)
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, version = EXCLUDED.version, expires_at = EXCLUDED.expires_at,
	purge_at = EXCLUDED.purge_at, writes = EXCLUDED.writes, versions = EXCLUDED.versions`,
			table, r.value, r.version, r.expires, r.writes, r.versions), key)
		return err
	}
	return fmt.Errorf("unknown foreign shape %q", shape)
}
