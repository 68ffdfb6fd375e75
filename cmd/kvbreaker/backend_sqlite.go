//go:build !simulateonly

package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvbreaker/kvbreaker/backends/sqlite"
)

// openSQLite opens the file --sqlite-path names, which must exist and hold
// the store's tables: a command that reads never creates a file where a
// path was mistyped ("kvbreaker init" creates it).
func openSQLite(ctx context.Context, f *backendFlags) (*conn, error) {
	s, err := sqlite.Open(ctx, f.sqlitePath, sqlite.WithCreate(false))
	if err != nil {
		return nil, err
	}
	return &conn{describe: "sqlite file " + f.sqlitePath, store: s, purge: sqlitePurge(s)}, nil
}

// initSQLite creates the file and its tables (sqlite.Open does), or says
// they were there.
func initSQLite(ctx context.Context, f *backendFlags) (initOutput, error) {
	out := initOutput{Backend: f.backend, Target: "sqlite file " + f.sqlitePath, Table: sqlite.Table}
	existed := false
	if s, err := sqlite.Open(ctx, f.sqlitePath, sqlite.WithCreate(false)); err == nil {
		existed = true
		s.Close()
	} else if !errors.Is(err, sqlite.ErrFileMissing) && !errors.Is(err, sqlite.ErrNotStore) {
		return out, err
	}
	if !existed {
		s, err := sqlite.Open(ctx, f.sqlitePath)
		if err != nil {
			return out, err
		}
		s.Close()
		out.Created = true
		out.Message = fmt.Sprintf("created the tables %s and %s in %s (WAL mode)", sqlite.Table, sqlite.MetaTable, f.sqlitePath)
		return out, nil
	}
	out.Message = fmt.Sprintf("%s already holds the tables %s and %s: left as it is", f.sqlitePath, sqlite.Table, sqlite.MetaTable)
	return out, nil
}

// sqlitePurge deletes a row whatever it holds: check's cleanup removes the
// tombstones and expired rows its writes left, which the store keeps until
// its purge. It discounts the delete from the count the schema's trigger
// keeps, as the store's purge does, so that followers do not take it for
// another program's.
func sqlitePurge(s *sqlite.Store) func(ctx context.Context, fullKey string) (int, error) {
	return func(ctx context.Context, fullKey string) (int, error) {
		tx, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			return 0, fmt.Errorf("sqlite: purge %q: %w", fullKey, err)
		}
		defer tx.Rollback() //nolint:errcheck // a no-op after Commit
		res, err := tx.ExecContext(ctx, "DELETE FROM kvbreaker WHERE key = ?", fullKey)
		if err != nil {
			return 0, fmt.Errorf("sqlite: purge %q: %w", fullKey, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE kvbreaker_meta SET value = value - ? WHERE name = 'deleted'", n); err != nil {
			return 0, fmt.Errorf("sqlite: purge %q: %w", fullKey, err)
		}
		return int(n), tx.Commit()
	}
}
