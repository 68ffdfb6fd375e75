package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"

	gomysql "github.com/go-sql-driver/mysql"
)

// String says what Prepare found and did, for a tool's output: "created
// (with index purge_at)" or "exists already; nothing changed (the store
// reads it)".
func (p Prepared) String() string {
	if p.Existed {
		return "exists already; nothing changed (the store reads it)"
	}
	return "created (with index purge_at)"
}

// A CreateDeniedError is Prepare's error when the server refuses the user
// the table (ER_TABLEACCESS_DENIED_ERROR, 1142): its message says who
// must create it and what the user must then be granted.
type CreateDeniedError struct {
	// User is the connection's user; Table the table Prepare was to make.
	User, Table string
	// Script names the SQL the one who may create the table runs; ""
	// names SchemaScript's.
	Script string
	// Err is the server's refusal.
	Err *gomysql.MySQLError
}

func (e *CreateDeniedError) Error() string {
	return fmt.Sprintf("user %q may not create table %s (%v): have an administrator run %s, and grant the user SELECT, INSERT, UPDATE, DELETE on it",
		e.User, e.Table, e.Err, cmp.Or(e.Script, fmt.Sprintf("the SQL mysql.SchemaScript(%q) returns", e.Table)))
}

// Unwrap returns the server's refusal.
func (e *CreateDeniedError) Unwrap() error { return e.Err }

// createDenied is err, CreateTable's, as a *CreateDeniedError when the
// server refused the user the table; the user is the one the server
// knows the connection by.
func createDenied(ctx context.Context, db *sql.DB, table string, err error) error {
	me, ok := errors.AsType[*gomysql.MySQLError](err)
	if !ok || me.Number != 1142 {
		return err
	}
	e := &CreateDeniedError{Table: table, Err: me}
	_ = db.QueryRowContext(ctx, "SELECT SUBSTRING_INDEX(USER(), '@', 1)").Scan(&e.User)
	return e
}
