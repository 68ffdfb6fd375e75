package mysql

import (
	"context"
	"database/sql"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

var _ driver.Lister = (*Store)(nil)

// List implements driver.Lister: live keys that begin with prefix, in
// bytewise key order, after cursor, at most limit, read as one range of
// the primary key. next is the last key returned when the page is full, ""
// otherwise.
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	if err := s.gate().List(prefix, limit); err != nil {
		return nil, "", err
	}
	st, args := stListAll, []any{prefix, cursor, limit}
	if end, ok := adapter.PrefixEnd(prefix); ok {
		st, args = stList, []any{prefix, cursor, end, limit}
	}
	var keys []string
	err := s.retry(ctx, st, func(stmt *sql.Stmt) error {
		keys = keys[:0]
		rows, err := stmt.QueryContext(ctx, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k []byte
			if err := rows.Scan(&k); err != nil {
				return err
			}
			keys = append(keys, string(k))
		}
		return rows.Err()
	})
	if err != nil {
		return nil, "", s.wrap(adapter.OpList, prefix, err)
	}
	return keys, adapter.NextCursor(keys, limit), nil
}
