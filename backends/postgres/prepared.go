package postgres

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// String says what Prepare found and did, for a tool's output: "created
// (with sequence T_version, index T_purge_at and trigger T_notify)",
// "exists already; added trigger T_notify, …" or "exists already; nothing
// changed (the store reads it)".
func (p Prepared) String() string {
	switch {
	case p.AddedTrigger:
		return "exists already; added trigger " + p.table + notifySuffix + ", which following its changes needs (the store reads it)"
	case p.Existed:
		return "exists already; nothing changed (the store reads it)"
	}
	return fmt.Sprintf("created (with sequence %s, index %s_purge_at and trigger %s)", p.table+seqSuffix, p.table, p.table+notifySuffix)
}

// A CreateDeniedError is Prepare's error when the server refuses the user
// the table or its trigger (SQLSTATE 42501, insufficient privilege): its
// message says who must create them and what the user must then be
// granted.
type CreateDeniedError struct {
	// User is the pool's user; Table the table Prepare was to make.
	User, Table string
	// Script names the SQL the one who may create the table runs; ""
	// names SchemaScript's.
	Script string
	// Err is the server's refusal.
	Err *pgconn.PgError
}

func (e *CreateDeniedError) Error() string {
	return fmt.Sprintf("user %q may not create table %s or its trigger (%s: %s, SQLSTATE %s): have the database or table owner run %s, and grant the user SELECT, INSERT, UPDATE, DELETE on it and USAGE on its sequence",
		e.User, e.Table, e.Err.Severity, e.Err.Message, e.Err.Code, cmp.Or(e.Script, fmt.Sprintf("the SQL postgres.SchemaScript(%q) returns", e.Table)))
}

// Unwrap returns the server's refusal.
func (e *CreateDeniedError) Unwrap() error { return e.Err }

// createDenied is err, CreateTable's, as a *CreateDeniedError when the
// server refused the privilege.
func createDenied(pool *pgxpool.Pool, table string, err error) error {
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == "42501" {
		return &CreateDeniedError{User: pool.Config().ConnConfig.User, Table: table, Err: pe}
	}
	return err
}
