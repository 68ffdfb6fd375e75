package main

import (
	"context"

	"github.com/kvbreaker/kvbreaker/backends/sqlite"
)

var sqliteBackend = backendDesc{
	name:  "sqlite",
	title: "SQLite",
	about: "(one SQLite file on this host)",
	flags: []connFlag{
		{name: "sqlite-path", env: "KVBREAKER_SQLITE_PATH", usage: "sqlite: the database `file` the fleet's processes share (made by \"kvbreaker init\" or the first sqlite.Open)", need: true},
	},
	usage:      "--sqlite-path /var/lib/app/kvbreaker.db",
	open:       openSQLite,
	leftBehind: purgedRows("sqlite"),
	wipes:      "rows deleted by another program are seen through the trigger kvbreaker_deleted; rows changed in place without a new version, or deleted with that trigger dropped, are not: restart the fleet's processes after such a change",
	create:     initSQLite,
	creates:    "SQLite's file and tables (--sqlite-path, in WAL mode: sqlite.Open)",
	prints:     "SQLite's SQL (sqlite.SchemaScript; pipe it to sqlite3)",
	script:     func(*backendFlags) (string, error) { return sqlite.SchemaScript, nil },
	example:    "--sqlite-path /var/lib/app/kvbreaker.db",
}

// openSQLite opens the file --sqlite-path names, which must exist and hold
// the store's tables: a command that reads never creates a file where a
// path was mistyped ("kvbreaker init" creates it).
func openSQLite(ctx context.Context, f *backendFlags) (*conn, error) {
	return opened(sqlite.Open(ctx, f.get("sqlite-path"), sqlite.WithCreate(false)))
}

// initSQLite creates the file and its tables (sqlite.Init), or says they
// were there.
func initSQLite(ctx context.Context, f *backendFlags) (initOutput, error) {
	i, err := sqlite.Init(ctx, f.get("sqlite-path"))
	return initOutput{Backend: f.backend, Target: "sqlite file " + f.get("sqlite-path"), Table: sqlite.Table, Created: i.Created, Message: i.String()}, err
}
