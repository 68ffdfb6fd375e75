package mysql

import (
	"context"
	"database/sql"
	"errors"
	"slices"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// Prepared says what Prepare found and did.
type Prepared struct {
	// Existed: the table was there (Prepare created it otherwise).
	Existed bool
}

// ErrForeignTable matches (errors.Is) Prepare's error when a Store cannot
// read the table: another program's table of the same name, or one of
// another shape. The error unwraps to the read's. It is
// adapter.ErrForeignTable, as every backend's.
var ErrForeignTable = adapter.ErrForeignTable

// Prepare makes table ready for a Store in db's database, for a tool that
// prepares it before a fleet starts and says what it did: CreateTable when
// the table does not exist, then a read as a Store reads
// (ErrForeignTable if that fails). opts are New's (WithEndpoint, for the
// read's errors).
func Prepare(ctx context.Context, db *sql.DB, table string, opts ...Option) (Prepared, error) {
	var p Prepared
	if _, err := Schema(table); err != nil {
		return p, err
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?", table).Scan(&n); err != nil {
		return p, err
	}
	if p.Existed = n > 0; !p.Existed {
		if err := CreateTable(ctx, db, table); err != nil {
			return p, createDenied(ctx, db, table, err)
		}
	}
	s, err := New(db, table, append(slices.Clip(opts), WithPurgeEvery(0))...)
	if err != nil {
		return p, err
	}
	defer s.Close()
	if _, _, err := s.Get(ctx, "kvbreaker-prepare-check.invalid"); err != nil && !errors.Is(err, driver.ErrNotFound) {
		return p, adapter.ForeignTable(err)
	}
	return p, nil
}

// Prepare is the package's Prepare of the store's table, on its pool,
// naming its server in the read's errors; its *CreateDeniedError names
// WithCreateScript's script, and a statement the context cut short is an
// *adapter.NoAnswerError naming the server.
func (s *Store) Prepare(ctx context.Context) (Prepared, error) {
	p, err := Prepare(ctx, s.db, s.table, WithEndpoint(s.endpoint))
	if de, ok := errors.AsType[*CreateDeniedError](err); ok {
		de.Script = s.o.script
	}
	return p, adapter.NoAnswer("mysql", s.endpoint, err)
}
