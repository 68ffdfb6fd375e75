package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// Prepared says what Prepare found and did.
type Prepared struct {
	// Existed: the table was there. AddedTrigger: it lacked the trigger
	// that notifies followers of its changes (a table an earlier version
	// made), and Prepare added it.
	Existed, AddedTrigger bool

	table string // for String
}

// ErrForeignTable matches (errors.Is) Prepare's error when the table
// exists but a Store cannot read it: another program's table, or one of
// another shape. Prepare then adds nothing to it. The error unwraps to the
// read's. It is adapter.ErrForeignTable, as every backend's.
var ErrForeignTable = adapter.ErrForeignTable

// Prepare makes table ready for a Store, for a tool that prepares it
// before a fleet starts and says what it did: CreateTable when the table
// does not exist; when it does, a read as a Store reads (ErrForeignTable
// if that fails), then CreateTable if it lacks the trigger Follow needs.
// Every statement is idempotent.
func Prepare(ctx context.Context, pool *pgxpool.Pool, table string) (Prepared, error) {
	p := Prepared{table: table}
	if _, err := Schema(table); err != nil {
		return p, err
	}
	t := quoteIdent(table)
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", t).Scan(&p.Existed); err != nil {
		return p, err
	}
	triggered := false
	if p.Existed {
		if err := pool.QueryRow(ctx, "SELECT count(*) = 2 FROM pg_trigger WHERE tgrelid = to_regclass($1) AND tgname IN ($2, $3)",
			t, table+notifySuffix, table+truncateSuffix).Scan(&triggered); err != nil {
			return p, err
		}
	} else if err := CreateTable(ctx, pool, table); err != nil {
		return p, createDenied(pool, table, err)
	}
	// Read it as a Store does: a table of another shape fails here, and
	// gets no trigger of ours.
	s, err := New(pool, table, WithPurgeEvery(0))
	if err != nil {
		return p, err
	}
	defer s.Close()
	if _, _, err := s.Get(ctx, "kvbreaker-prepare-check.invalid"); err != nil && !errors.Is(err, driver.ErrNotFound) {
		return p, adapter.ForeignTable(err)
	}
	if p.Existed && !triggered {
		if err := CreateTable(ctx, pool, table); err != nil {
			return p, createDenied(pool, table, err)
		}
		p.AddedTrigger = true
	}
	return p, nil
}

// Prepare is the package's Prepare of the store's table, on its pool;
// its *CreateDeniedError names WithCreateScript's script, and a statement
// the context cut short is an *adapter.NoAnswerError naming the server.
func (s *Store) Prepare(ctx context.Context) (Prepared, error) {
	p, err := Prepare(ctx, s.pool, s.table)
	if de, ok := errors.AsType[*CreateDeniedError](err); ok {
		de.Script = s.o.script
	}
	return p, adapter.NoAnswer("postgres", s.endpoint, err)
}
