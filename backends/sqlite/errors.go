package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// What a *FileError says is wrong with the database file; match them with
// errors.Is.
var (
	// ErrFileMissing: the file does not exist (and the store was told
	// not to create it, WithCreate(false)), or its directory does not.
	ErrFileMissing = errors.New("sqlite: no such database file")
	// ErrFileLocked: another connection held the file's write lock for
	// longer than the busy timeout (WithBusyTimeout), or holds it
	// exclusively (a process that opened it in locking_mode=EXCLUSIVE, or
	// with another journal mode that has it mid-transaction).
	ErrFileLocked = errors.New("sqlite: database file locked")
	// ErrFileCorrupt: the file is not an SQLite database, or SQLite found
	// it damaged (SQLITE_NOTADB, SQLITE_CORRUPT).
	ErrFileCorrupt = errors.New("sqlite: database file corrupt")
	// ErrNotStore: the file is an SQLite database without this store's
	// tables (and the store was told not to create them).
	ErrNotStore = errors.New("sqlite: database file holds no kvbreaker table")
)

// FileError is what is wrong with the database file itself, as opposed to a
// call's own failure: "/var/lib/app/breaker.db: database file locked:
// database is locked (5) (SQLITE_BUSY) (the busy timeout is 5s)", within
// "sqlite: compare-and-swap <key>: …". Kind is one of
// ErrFileMissing, ErrFileLocked, ErrFileCorrupt and ErrNotStore, which it
// matches (errors.Is); Err is the driver's error (a *sqlite.Error, whose
// Code is SQLite's result code) or the file system's. Open and the Store's
// methods return it as the cause of a *driver.OpError.
type FileError struct {
	Path string
	Kind error
	// Detail says what to do or what was found, appended to the message.
	Detail string
	Err    error
}

func (e *FileError) Error() string {
	msg := e.Path + ": " + strings.TrimPrefix(e.Kind.Error(), "sqlite: ")
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	return msg
}

// Is reports whether target is e's Kind.
func (e *FileError) Is(target error) bool { return target == e.Kind }

// Unwrap returns the cause.
func (e *FileError) Unwrap() error { return e.Err }

// code is err's primary SQLite result code, or 0 when err is not SQLite's.
func code(err error) int {
	if se, ok := errors.AsType[*sqlite.Error](err); ok {
		return se.Code() & 0xff
	}
	return 0
}

// cause turns an error of a call into the cause its OpError carries: a
// *FileError when the file is locked past the busy timeout or corrupt; the
// context's error, said as such, when the context ended; otherwise err.
func (s *Store) cause(ctx context.Context, err error) error {
	switch code(err) {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		if ctx.Err() == nil {
			return &FileError{Path: s.path, Kind: ErrFileLocked, Err: err, Detail: fmt.Sprintf("the busy timeout is %v", s.o.busyTimeout)}
		}
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return &FileError{Path: s.path, Kind: ErrFileCorrupt, Err: err, Detail: "restore it, or move it away and let the store create a new one"}
	case sqlite3.SQLITE_CANTOPEN:
		return &FileError{Path: s.path, Kind: ErrFileMissing, Err: err}
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("the context ended before %s answered (the outcome of a write is unknown): %w", s.path, errors.Join(ctxErr, err))
	}
	return err
}
