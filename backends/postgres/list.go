package postgres

import (
	"context"
	"unicode/utf8"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

var _ driver.Lister = (*Store)(nil)

// List implements driver.Lister: live keys that begin with prefix, in key
// order (bytewise: the key column's "C" collation), after cursor, at most
// limit, read as one range of the primary key's index. next is the last key
// returned when the page is full, "" otherwise. A prefix that is not UTF-8
// is refused by the server.
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	if err := s.gate().List(prefix, limit); err != nil {
		return nil, "", err
	}
	sql, args := s.sqlListAll, []any{prefix, cursor, limit}
	if end, ok := prefixEnd(prefix); ok {
		sql, args = s.sqlList, append(args, end)
	}
	var keys []string
	err := s.retry(ctx, func() error {
		keys = keys[:0]
		rows, err := s.pool.Query(ctx, sql, args...)
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
		return nil, "", s.wrap(adapter.OpList, prefix, err)
	}
	return keys, adapter.NextCursor(keys, limit), nil
}

// prefixEnd returns the least string above every string that begins with
// prefix, in the order of code points (UTF-8's bytewise order, the "C"
// collation's): prefix with its last code point below U+10FFFF incremented
// and what follows it dropped. There is none (false) when prefix is empty or
// all U+10FFFF; then every string at or above prefix begins with it. The
// surrogates, which text cannot hold, are skipped. A prefix that is not
// UTF-8 gets itself, an empty range; the server refuses it anyway.
func prefixEnd(prefix string) (string, bool) {
	for p := prefix; p != ""; {
		r, size := utf8.DecodeLastRuneInString(p)
		p = p[:len(p)-size]
		switch {
		case r == utf8.RuneError && size == 1:
			return prefix, true
		case r == utf8.MaxRune:
			continue
		case r == 0xD7FF:
			return p + "\uE000", true
		default:
			return p + string(r+1), true
		}
	}
	return "", false
}
