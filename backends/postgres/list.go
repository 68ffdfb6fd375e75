package postgres

import (
	"context"
	"fmt"

	"github.com/kvbreaker/kvbreaker/driver"
)

var _ driver.Lister = (*Store)(nil)

// List implements driver.Lister: live keys that begin with prefix, in key
// order (bytewise: the key column's "C" collation), after cursor, at most
// limit, read through the primary key's index. next is the last key
// returned when the page is full, "" otherwise.
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	if limit <= 0 {
		return nil, "", s.wrap(opList, "", fmt.Errorf("limit %d is not positive", limit))
	}
	var keys []string
	err := s.retry(ctx, func() error {
		keys = keys[:0]
		rows, err := s.pool.Query(ctx, s.sqlList, prefix, cursor, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				return err
			}
			keys = append(keys, k)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, "", s.wrap(opList, "", err)
	}
	next := ""
	if len(keys) == limit {
		next = keys[len(keys)-1]
	}
	return keys, next, nil
}
