package sqlite

import (
	"context"
	"database/sql"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

var (
	_ driver.Lister       = (*Store)(nil)
	_ driver.ExpiryReader = (*Store)(nil)
)

// List implements driver.Lister: live keys that begin with prefix, in
// bytewise key order, after cursor, at most limit, read as one range of
// the primary key. next is the last key returned when the page is full, ""
// otherwise.
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	if err := s.gate().List(prefix, limit); err != nil {
		return nil, "", err
	}
	now := s.now()
	var (
		rows *sql.Rows
		err  error
	)
	if end, ok := adapter.PrefixEnd(prefix); ok {
		rows, err = s.db.QueryContext(ctx, `SELECT key FROM kvbreaker
WHERE key >= ?1 AND key < ?2 AND key > ?3 AND expires_at > ?4 ORDER BY key LIMIT ?5`, prefix, end, cursor, now, limit)
	} else {
		rows, err = s.db.QueryContext(ctx, `SELECT key FROM kvbreaker
WHERE key >= ?1 AND key > ?2 AND expires_at > ?3 ORDER BY key LIMIT ?4`, prefix, cursor, now, limit)
	}
	if err != nil {
		return nil, "", s.wrap(ctx, adapter.OpList, prefix, err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, "", s.wrap(ctx, adapter.OpList, prefix, err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, "", s.wrap(ctx, adapter.OpList, prefix, err)
	}
	return keys, adapter.NextCursor(keys, limit), nil
}
