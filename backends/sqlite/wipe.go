package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
)

// Why a Follow sends ChangeLost when the file changed behind the stores'
// back (besides errPurged, a purge of rows it had not read).
var (
	// ErrRowsDeleted: rows were deleted by another program (the schema's
	// trigger counts every delete; the store's purge discounts its own).
	ErrRowsDeleted = errors.New("sqlite: rows deleted by another program than a Store")
	// ErrFileRestored: the file's rows went back to an earlier state (a
	// backup restored into it): its version counter fell, or the last row
	// the follower read holds an older version, or is gone unpurged.
	ErrFileRestored = errors.New("sqlite: the file went back to an earlier state (a backup restored into it?)")
	// ErrFileReplaced: another file has taken the path; this Store still
	// has the one Open found. Reopen the Store (restart the process) to
	// use the new file.
	ErrFileReplaced = errors.New("sqlite: another file has taken the store's path: reopen the Store")
)

// witness is the row of the highest version a follower has read: it
// keeps that version until a later write (which takes a higher one) or
// the purge (which records the version it removes), so finding it older,
// or gone unpurged, shows the file was set back.
type witness struct {
	key     string
	version int64
}

// watch is what a follower checks on each read besides the rows above
// its counter: how many deletes the store did not make, and the witness.
type watch struct {
	deleted int64
	witness witness
}

// replaced reports whether the store's path now names another file than
// the one Open found.
func (s *Store) replaced() error {
	fi, err := os.Stat(s.path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrFileReplaced, err)
	}
	if s.file != nil && !os.SameFile(fi, s.file) {
		return ErrFileReplaced
	}
	return nil
}

// check compares what a read found with what the follower knew: the
// deletes no purge made (deleted), the counter (last), the highest version
// purged, and the witness's version now (cur, invalid when the row is
// gone).
func (f *follower) check(deleted, last, purged int64, cur sql.NullInt64) error {
	if deleted != f.watch.deleted {
		return fmt.Errorf("%w: %d deletes since the follower's last read", ErrRowsDeleted, deleted-f.watch.deleted)
	}
	if last < f.last {
		return fmt.Errorf("%w: its version counter fell from %d to %d", ErrFileRestored, f.last, last)
	}
	w := f.watch.witness
	switch {
	case w.key == "":
	case cur.Valid && cur.Int64 != w.version && cur.Int64 <= f.last:
		return fmt.Errorf("%w: %q holds version %d, after %d was read", ErrFileRestored, w.key, cur.Int64, w.version)
	case !cur.Valid && purged < w.version:
		return fmt.Errorf("%w: %q, read at version %d, is gone and was not purged", ErrFileRestored, w.key, w.version)
	}
	return nil
}
