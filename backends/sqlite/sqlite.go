// Package sqlite is a driver.Store over one SQLite file, for a fleet of
// worker processes on one host that share no server: one row per host,
// compare-and-swap and compare-and-delete each in one BEGIN IMMEDIATE
// transaction, expiry judged by the host's clock. It uses
// modernc.org/sqlite, SQLite compiled to Go: no cgo, so `go install` and
// cross-compiling keep working.
//
// # The file
//
// Open opens (by default creates) the file in WAL mode
// (journal_mode=WAL, kept in the file: readers never wait for the writer,
// and the writer waits only for another writer), with synchronous=NORMAL
// and a busy timeout (WithBusyTimeout, default 5 s) for the write lock. It
// creates the tables if they are missing (Schema). Every process of the
// fleet opens the same path; SQLite's locks in the file and in its -shm
// file make their transactions serial. WAL needs those locks and that
// shared memory to work, so the file must be on a local file system of the
// one host every process runs on: not on NFS or SMB, and not shared with a
// container whose /dev/shm or kernel differs.
//
// synchronous=NORMAL makes a committed write durable against a crash of
// any process (a kill -9 mid-write loses at most that uncommitted write;
// TestKillMidWrite checks the file afterwards) but not against the
// machine losing power, which may undo the last writes before a
// checkpoint: the records are a breaker's recent failures and restraints,
// which a fleet rebuilds from its next failures.
//
// # Rows
//
//	key         TEXT     primary key: the key as the Breaker passes it (compared bytewise)
//	value       BLOB     the encoded record (empty for a tombstone)
//	version     INTEGER  new on every write, from the file's counter (below)
//	expires_at  INTEGER  the writer's clock + ttl, in Unix nanoseconds; the least integer for a tombstone
//	purge_at    INTEGER  when the purge may delete the row: expires_at (or the delete) + WithPurgeDelay
//
// The table is STRICT, so no other type can be stored in a column, and
// version > 0 is a constraint. Versions come from one counter in the
// table kvbreaker_meta: every write takes max(counter + 1, the row's
// version + 1, the Unix time in microseconds) and stores it back, in the
// write's transaction. So a key's versions only grow, also across delete,
// expiry and purge; and a file removed and created again starts above
// every version the old one gave (no SQLite write takes under a
// microsecond). Since writes are serial, versions also order the file's
// commits, which is what Follow reads.
//
// # Expiry: one clock
//
// A write stores its process's clock plus the TTL, in nanoseconds (exact:
// no rounding); Get, List and every condition compare it with the reading
// process's clock. Every process on the host reads the same clock (the
// kernel's CLOCK_REALTIME, through time.Now), so there is no skew between
// writer and reader, nor between a Breaker and the store when the Breaker
// uses time.Now too: the store declares driver.ExpiryReaderFiltered, whose
// margin does not count the fleet's skew. What remains is the host clock
// itself stepping (NTP stepping it, or an operator): a step forward by d
// expires every record d early, and ends every restraint d early too; a
// step back by d keeps records d longer, and restraints too, on every
// process at once. Since the Breakers read the same clock, they agree with
// the store throughout; only Settings.ClockSkew's "distance from true
// time" moves, for all of them together. The physical row stays until
// purge_at, WithPurgeDelay (default one minute) after its expiry, which
// bounds the ClockSkew a fleet may declare (Traits.MaxClockSkew).
//
// # Compare-and-swap
//
// CompareAndSwap and CompareAndDelete each run one transaction begun with
// BEGIN IMMEDIATE, which takes the file's write lock at once (waiting up
// to the busy timeout for another writer): read the row, compare in Go,
// write the row and the counter, COMMIT. Nothing can write between the
// read and the write, and a failed comparison writes nothing and answers
// a *driver.ConflictError with the value and version it read. A delete
// leaves a tombstone (expired, empty, with a fresh version) so that a
// follower sees it; the purge removes it. Within one process a Store
// serialises its own writers before they ask for the lock, so they queue
// in Go rather than in SQLite's busy handler, which polls.
//
// Nothing is sent over a network, so no answer can be lost after a
// commit: a call returns COMMIT's own result. A call whose context ends
// while it runs is interrupted (sqlite3_interrupt); if that happens during
// COMMIT the outcome is unknown, and the error says so and matches
// ctx.Err(). The store never resends a write.
//
// # Purging
//
// Every WithPurgeEvery successful writes (default 1000) the store deletes,
// in the background, one batch of at most WithPurgeBatch rows (default
// 1000) whose purge_at has passed, in one write transaction; Purge does
// one batch on demand.
//
// # Errors
//
// Errors other than driver.ErrNotFound and conflicts are *driver.OpError
// ("sqlite: get <key>: <cause>"). A file that is missing, locked past the
// busy timeout, corrupt or not a store's is a *FileError as the cause,
// matching ErrFileMissing, ErrFileLocked, ErrFileCorrupt or ErrNotStore,
// also from Open ("sqlite: open: /path/to.db: no such database file").
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// The Op of an error of this adapter's own calls (driver.OpError.Op); the
// contract's methods use adapter's Op names.
const (
	opPurge = "purge"
	opOpen  = "open"
)

// Defaults of the options; the purge options' defaults are adapter's
// (adapter.DefaultPurge).
const (
	DefaultBusyTimeout = 5 * time.Second
	DefaultCallTimeout = 10 * time.Second
)

// Table and MetaTable are the tables the store keeps in the file.
const (
	Table     = "kvbreaker"
	MetaTable = "kvbreaker_meta"
)

// Schema is the SQL that creates the store's tables and indexes if they
// are missing; Open runs it unless WithCreate(false).
const Schema = `CREATE TABLE IF NOT EXISTS kvbreaker (
	key        TEXT    NOT NULL PRIMARY KEY,
	value      BLOB    NOT NULL,
	version    INTEGER NOT NULL CHECK (version > 0),
	expires_at INTEGER NOT NULL,
	purge_at   INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS kvbreaker_purge_at ON kvbreaker (purge_at);
CREATE INDEX IF NOT EXISTS kvbreaker_version ON kvbreaker (version);
CREATE TABLE IF NOT EXISTS kvbreaker_meta (
	name  TEXT    NOT NULL PRIMARY KEY,
	value INTEGER NOT NULL
) STRICT;
INSERT OR IGNORE INTO kvbreaker_meta (name, value) VALUES ('version', 0), ('purged', 0), ('deleted', 0);
CREATE TRIGGER IF NOT EXISTS kvbreaker_deleted AFTER DELETE ON kvbreaker BEGIN
	UPDATE kvbreaker_meta SET value = value + 1 WHERE name = 'deleted';
END;`

// tombstone is a tombstone's expires_at: expired for every clock.
const tombstone = math.MinInt64

// Store is a driver.Store over one SQLite file. It is safe for concurrent
// use, by goroutines and by processes (each with its own Store). The zero
// value is not usable; call Open.
type Store struct {
	db   *sql.DB
	path string
	o    options
	// file is the file as Open found it, to tell when another file has
	// taken its path (Follow).
	file os.FileInfo

	// writer admits one of this Store's writes at a time (see
	// "Compare-and-swap").
	writer chan struct{}

	purger *adapter.Purger
	closed atomic.Bool
}

// ErrClosed is the cause of a Store method's *driver.OpError after Close.
var ErrClosed = errors.New("store closed")

type options struct {
	busyTimeout time.Duration
	purge       adapter.Purge
	callTimeout time.Duration
	create      bool
	clock       func() time.Time
	poll        time.Duration
}

// Option configures a Store.
type Option func(*options)

// WithBusyTimeout bounds how long a write waits for another connection's
// write lock (default DefaultBusyTimeout) before it fails with
// ErrFileLocked; the caller's context bounds it too.
func WithBusyTimeout(d time.Duration) Option { return func(o *options) { o.busyTimeout = d } }

// WithPurgeEvery makes the store purge one batch of expired rows in the
// background after every n successful writes (default
// adapter.DefaultPurge.Every); 0 turns automatic purging off (call Purge
// yourself).
func WithPurgeEvery(n int) Option { return func(o *options) { o.purge.Every = n } }

// WithPurgeBatch bounds the rows one purge deletes (default
// adapter.DefaultPurge.Batch).
func WithPurgeBatch(n int) Option { return func(o *options) { o.purge.Batch = n } }

// WithPurgeDelay sets how long after its expiry (or its delete) a row may
// be purged (default adapter.DefaultPurge.Delay). It is the largest
// Settings.ClockSkew a fleet may declare over this store
// (Traits.MaxClockSkew), and how far behind a follower may fall before it
// must resynchronise.
func WithPurgeDelay(d time.Duration) Option { return func(o *options) { o.purge.Delay = d } }

// WithCallTimeout bounds the purges the store runs on its own (default
// DefaultCallTimeout); calls made by the caller are bounded by its context.
func WithCallTimeout(d time.Duration) Option { return func(o *options) { o.callTimeout = d } }

// WithCreate(false) makes Open refuse a file that does not exist
// (ErrFileMissing) or lacks the store's tables (ErrNotStore) instead of
// creating them, as a command that only reads should.
func WithCreate(create bool) Option { return func(o *options) { o.create = create } }

// WithClock sets the clock expiry is judged by (default time.Now). Every
// process sharing the file must judge by the same clock; tests move it.
func WithClock(now func() time.Time) Option { return func(o *options) { o.clock = now } }

// WithFollowPoll sets how often Follow reads the file for changes (default
// DefaultFollowPoll, and never less often than its heartbeat).
func WithFollowPoll(d time.Duration) Option { return func(o *options) { o.poll = d } }

// Open opens the SQLite file at path (creating it and its tables unless
// WithCreate(false)), switches it to WAL mode and checks that it is a
// store's. Every invalid option is reported, joined, as a
// *driver.OptionError; a file that is missing, locked, corrupt or holds no
// store is a *driver.OpError (Op "open") around a *FileError. Close releases it. To keep several fleets apart
// in one file, wrap the store with kvbreaker.Prefixed.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	o := options{busyTimeout: DefaultBusyTimeout, purge: adapter.DefaultPurge,
		callTimeout: DefaultCallTimeout, create: true, clock: time.Now, poll: DefaultFollowPoll}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	problems := adapter.Problems{Backend: "sqlite"}
	bad := problems.Add
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		bad("path", fmt.Sprintf("%q", path), "name a file on a local file system, e.g. /var/lib/app/kvbreaker.db (the processes of a fleet share it)")
	}
	if o.busyTimeout <= 0 || o.busyTimeout%time.Millisecond != 0 {
		bad("WithBusyTimeout", o.busyTimeout, fmt.Sprintf("set a positive number of milliseconds, or leave it out for %v", DefaultBusyTimeout))
	}
	o.purge.Check(&problems)
	problems.Positive("WithCallTimeout", o.callTimeout, DefaultCallTimeout)
	problems.Clock(o.clock)
	problems.Positive("WithFollowPoll", o.poll, DefaultFollowPoll)
	if err := problems.Err(); err != nil {
		return nil, err
	}
	s := &Store{path: path, o: o, writer: make(chan struct{}, 1)}
	s.purger = adapter.NewPurger(o.purge.Every, o.callTimeout, s.Purge)
	if err := s.open(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Store) open(ctx context.Context) error {
	missing := func(err error, detail string) error {
		return &driver.OpError{Backend: "sqlite", Op: opOpen, Err: &FileError{Path: s.path, Kind: ErrFileMissing, Err: err, Detail: detail}}
	}
	if _, err := os.Stat(s.path); err != nil {
		switch {
		case !errors.Is(err, os.ErrNotExist):
			return missing(err, "")
		case !s.o.create:
			return missing(nil, `create it with "kvbreaker init --backend sqlite", or open it with WithCreate(true)`)
		}
		if _, err := os.Stat(filepath.Dir(s.path)); err != nil {
			return missing(err, "its directory must exist")
		}
	}
	mode := "rwc"
	if !s.o.create {
		mode = "rw"
	}
	db, err := sql.Open("sqlite", dsn(s.path, mode, s.o.busyTimeout))
	if err != nil {
		return &driver.OpError{Backend: "sqlite", Op: opOpen, Err: err}
	}
	s.db = db
	fail := func(err error) error {
		db.Close()
		return &driver.OpError{Backend: "sqlite", Op: opOpen, Err: err}
	}
	var journal string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&journal); err != nil {
		return fail(s.cause(ctx, err))
	}
	if !strings.EqualFold(journal, "wal") {
		return fail(fmt.Errorf("journal_mode is %q, not wal: another process holds the file in another mode", journal))
	}
	if s.o.create {
		if _, err := db.ExecContext(ctx, Schema); err != nil {
			return fail(s.cause(ctx, err))
		}
	} else {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('kvbreaker', 'kvbreaker_meta')").Scan(&n); err != nil {
			return fail(s.cause(ctx, err))
		}
		if n != 2 {
			return fail(&FileError{Path: s.path, Kind: ErrNotStore, Detail: `create the tables with "kvbreaker init --backend sqlite" or sqlite.Schema`})
		}
	}
	s.file, _ = os.Stat(s.path) // after the first connection created it
	return nil
}

// dsn is the driver's name for path: a file: URI (path escaped as SQLite's
// URIs want) with the pragmas every connection of the pool runs when it
// opens. journal_mode=WAL persists in the file; busy_timeout and
// synchronous are the connection's.
func dsn(path, mode string, busy time.Duration) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(abs))
	if !strings.HasPrefix(esc, "/") {
		esc = "/" + esc // a Windows drive letter
	}
	return fmt.Sprintf("file:%s?mode=%s&_txlock=immediate&_busy_timeout=%d&_journal_mode=WAL&_synchronous=NORMAL",
		esc, mode, busy.Milliseconds())
}

// Path returns the file's path as Open was given it.
func (s *Store) Path() string { return s.path }

// String names the store for a tool's output or a log: "sqlite file
// /var/lib/app/kvbreaker.db".
func (s *Store) String() string { return "sqlite file " + s.path }

// DB returns the store's database handle, for what the store does not do
// (PRAGMA integrity_check, backups). Writes to the store's tables
// must keep its rules (Schema, the package doc).
func (s *Store) DB() *sql.DB { return s.db }

// DefaultTraits is what a Store declares with default options: see Traits.
func DefaultTraits() driver.Traits { return traits(adapter.DefaultPurge.Delay) }

// Traits: atomic conditional writes; expiry exact to the nanosecond, by
// the clock every process on the host shares (driver.ExpiryReaderFiltered:
// the writer sets the instant and the reader judges it, on one clock);
// reads never stale; the physical row outlasts its expiry by
// WithPurgeDelay, which bounds the fleet's ClockSkew.
func (s *Store) Traits() driver.Traits { return traits(s.o.purge.Delay) }

func traits(purgeDelay time.Duration) driver.Traits {
	return driver.Traits{
		Atomic:             true,
		Expiry:             driver.ExpiryModel{Kind: driver.ExpiryReaderFiltered},
		MaxClockSkew:       purgeDelay,
		MaxClockSkewOption: "sqlite.WithPurgeDelay",
	}
}

// gate is what Follow and List check before they read the file. Its
// refusals carry no cause of the file's (s.wrap): nothing was read.
func (s *Store) gate() adapter.Gate {
	return adapter.Gate{Closed: s.closed.Load, ErrClosed: ErrClosed, Wrap: func(op, key string, err error) error {
		return &driver.OpError{Backend: "sqlite", Op: op, Key: key, Err: err}
	}}
}

func (s *Store) wrap(ctx context.Context, op, key string, err error) error {
	return &driver.OpError{Backend: "sqlite", Op: op, Key: key, Err: s.cause(ctx, err)}
}

func (s *Store) now() int64 { return s.o.clock().UnixNano() }

// Get implements driver.Store: the row's value and version if it is live
// by the store's clock, driver.ErrNotFound otherwise.
func (s *Store) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	if s.closed.Load() {
		return nil, driver.NoVersion, s.wrap(ctx, adapter.OpGet, key, ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, driver.NoVersion, s.wrap(ctx, adapter.OpGet, key, err)
	}
	var (
		value []byte
		ver   int64
	)
	err := s.db.QueryRowContext(ctx, "SELECT value, version FROM kvbreaker WHERE key = ? AND expires_at > ?", key, s.now()).Scan(&value, &ver)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, driver.NoVersion, driver.ErrNotFound
	}
	if err != nil {
		return nil, driver.NoVersion, s.wrap(ctx, adapter.OpGet, key, err)
	}
	if value == nil {
		value = []byte{}
	}
	return value, driver.Version(ver), nil
}

// row is a key's row as a write transaction reads it.
type row struct {
	found     bool
	value     []byte
	version   int64
	expiresAt int64
}

// CompareAndSwap implements driver.Store in one BEGIN IMMEDIATE
// transaction (see "Compare-and-swap") and returns the new version. A
// failed comparison is a *driver.ConflictError with the current value and
// version (NoVersion when absent or expired). ttl must be positive.
func (s *Store) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	if s.closed.Load() {
		return driver.NoVersion, s.wrap(ctx, adapter.OpSwap, key, ErrClosed)
	}
	if ttl <= 0 {
		return driver.NoVersion, s.wrap(ctx, adapter.OpSwap, key, fmt.Errorf("ttl %v is not positive", ttl))
	}
	if value == nil {
		value = []byte{}
	}
	var got driver.Version
	err := s.write(ctx, adapter.OpSwap, key, func(tx *sql.Tx, r row, now int64) error {
		live := r.found && r.expiresAt > now
		switch {
		case old == driver.NoVersion && live, old != driver.NoVersion && (!live || driver.Version(r.version) != old):
			return conflict(r, live)
		}
		exp := addSat(now, int64(ttl))
		v, err := s.put(ctx, tx, key, value, r, exp, addSat(exp, int64(s.o.purge.Delay)))
		got = v
		return err
	})
	if err != nil {
		return driver.NoVersion, err
	}
	s.purger.Wrote()
	return got, nil
}

// CompareAndDelete implements driver.Store in one BEGIN IMMEDIATE
// transaction that turns the row into a tombstone. It returns
// driver.ErrNotFound when the key is absent or expired and a conflict (as
// for CompareAndSwap) when another version is there.
func (s *Store) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	if s.closed.Load() {
		return s.wrap(ctx, adapter.OpDelete, key, ErrClosed)
	}
	err := s.write(ctx, adapter.OpDelete, key, func(tx *sql.Tx, r row, now int64) error {
		live := r.found && r.expiresAt > now
		switch {
		case !live:
			return driver.ErrNotFound
		case driver.Version(r.version) != old:
			return conflict(r, live)
		}
		_, err := s.put(ctx, tx, key, []byte{}, r, tombstone, addSat(now, int64(s.o.purge.Delay)))
		return err
	})
	if err == nil {
		s.purger.Wrote()
	}
	return err
}

func conflict(r row, live bool) error {
	if !live {
		return &driver.ConflictError{Version: driver.NoVersion}
	}
	if r.value == nil {
		r.value = []byte{}
	}
	return &driver.ConflictError{Value: r.value, Version: driver.Version(r.version)}
}

// write runs decide in a write transaction over key's row, then commits.
// decide returns nil to commit what it wrote, or the answer to return
// without writing.
func (s *Store) write(ctx context.Context, op, key string, decide func(tx *sql.Tx, r row, now int64) error) error {
	if err := ctx.Err(); err != nil {
		return s.wrap(ctx, op, key, err)
	}
	select {
	case s.writer <- struct{}{}:
	case <-ctx.Done():
		return s.wrap(ctx, op, key, ctx.Err())
	}
	defer func() { <-s.writer }()
	tx, err := s.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (_txlock=immediate)
	if err != nil {
		return s.wrap(ctx, op, key, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it does nothing
	var r row
	err = tx.QueryRowContext(ctx, "SELECT value, version, expires_at FROM kvbreaker WHERE key = ?", key).Scan(&r.value, &r.version, &r.expiresAt)
	switch {
	case err == nil:
		r.found = true
	case !errors.Is(err, sql.ErrNoRows):
		return s.wrap(ctx, op, key, err)
	}
	// The clock is read once the lock is held, so a write that waited for
	// the lock judges expiry as of when it writes.
	if err := decide(tx, r, s.now()); err != nil {
		return err // a conflict or driver.ErrNotFound bare, or an *OpError
	}
	if err := tx.Commit(); err != nil {
		return s.wrap(ctx, op, key, err)
	}
	return nil
}

// put writes key's row and the counter in tx and returns the new version.
func (s *Store) put(ctx context.Context, tx *sql.Tx, key string, value []byte, r row, expiresAt, purgeAt int64) (driver.Version, error) {
	var counter int64
	if err := tx.QueryRowContext(ctx, "SELECT value FROM kvbreaker_meta WHERE name = 'version'").Scan(&counter); err != nil {
		return 0, s.wrap(ctx, adapter.OpSwap, key, err)
	}
	v := max(counter+1, r.version+1, time.Now().UnixMicro())
	if _, err := tx.ExecContext(ctx, `INSERT INTO kvbreaker (key, value, version, expires_at, purge_at) VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT (key) DO UPDATE SET value = ?2, version = ?3, expires_at = ?4, purge_at = ?5`, key, value, v, expiresAt, purgeAt); err != nil {
		return 0, s.wrap(ctx, adapter.OpSwap, key, err)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE kvbreaker_meta SET value = ? WHERE name = 'version'", v); err != nil {
		return 0, s.wrap(ctx, adapter.OpSwap, key, err)
	}
	return driver.Version(v), nil
}

// addSat is a + b, saturated at the largest int64 (a TTL of centuries).
func addSat(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Expiry implements driver.ExpiryReader: the time from the store's clock
// to the row's expires_at, to the nanosecond; driver.ErrNotFound when Get
// reads the key as absent (no row, an expired one, or a tombstone),
// though the row stays until purged.
func (s *Store) Expiry(ctx context.Context, key string) (time.Duration, error) {
	if s.closed.Load() {
		return 0, s.wrap(ctx, adapter.OpExpiry, key, ErrClosed)
	}
	now := s.now()
	var exp int64
	err := s.db.QueryRowContext(ctx, "SELECT expires_at FROM kvbreaker WHERE key = ? AND expires_at > ?", key, now).Scan(&exp)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, driver.ErrNotFound
	case err != nil:
		return 0, s.wrap(ctx, adapter.OpExpiry, key, err)
	case exp == math.MaxInt64:
		return driver.NoExpiry, nil
	}
	return time.Duration(exp - now), nil
}

// Purge deletes, in one write transaction, at most one batch
// (WithPurgeBatch) of rows whose purge_at has passed by the store's clock,
// oldest first, and returns how many it deleted. The store calls it every
// WithPurgeEvery writes; call it yourself (until it returns fewer than a
// batch) to drain a backlog.
func (s *Store) Purge(ctx context.Context) (int64, error) {
	if s.closed.Load() {
		return 0, s.wrap(ctx, opPurge, "", ErrClosed)
	}
	var n int64
	err := s.write(ctx, opPurge, "", func(tx *sql.Tx, _ row, now int64) error {
		rows, err := tx.QueryContext(ctx, `DELETE FROM kvbreaker WHERE key IN (
	SELECT key FROM kvbreaker WHERE purge_at <= ? ORDER BY purge_at LIMIT ?) RETURNING version`, now, s.o.purge.Batch)
		if err != nil {
			return s.wrap(ctx, opPurge, "", err)
		}
		var top int64
		for rows.Next() {
			var v int64
			if err := rows.Scan(&v); err != nil {
				rows.Close()
				return s.wrap(ctx, opPurge, "", err)
			}
			n++
			top = max(top, v)
		}
		if err := rows.Close(); err != nil {
			return s.wrap(ctx, opPurge, "", err)
		}
		if err := rows.Err(); err != nil {
			return s.wrap(ctx, opPurge, "", err)
		}
		// Followers that have not read past the highest version purged
		// may have missed a delete: they resynchronise (Follow).
		if _, err := tx.ExecContext(ctx, "UPDATE kvbreaker_meta SET value = max(value, ?) WHERE name = 'purged'", top); err != nil {
			return s.wrap(ctx, opPurge, "", err)
		}
		// The trigger counted these deletes; what it counts beyond the
		// purges' is another program's (Follow).
		if _, err := tx.ExecContext(ctx, "UPDATE kvbreaker_meta SET value = value - ? WHERE name = 'deleted'", n); err != nil {
			return s.wrap(ctx, opPurge, "", err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// Close waits for a background purge to end, starts no more, and closes
// the file. Later calls fail with ErrClosed, a running Follow as soon as
// it next reads the file.
func (s *Store) Close() error {
	// After the purger: the background purge Close waits for calls Purge.
	already := s.purger.Close()
	if already {
		return nil
	}
	s.closed.Store(true)
	return s.db.Close()
}

// PurgeKey deletes key's row whatever it holds (a record, a tombstone, or
// an expired row kept until Purge) and returns how many rows it deleted, 0
// or 1. It discounts the delete from the count the schema's trigger keeps,
// as Purge does, so that followers do not take it for another program's.
// It bypasses the compare-and-swap a Breaker relies on: it is for a tool
// that cleans up keys it wrote itself (kvbreaker check).
func (s *Store) PurgeKey(ctx context.Context, key string) (int64, error) {
	if s.closed.Load() {
		return 0, fmt.Errorf("sqlite: purge %q: %w", key, ErrClosed)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("sqlite: purge %q: %w", key, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	res, err := tx.ExecContext(ctx, "DELETE FROM "+Table+" WHERE key = ?", key)
	if err != nil {
		return 0, fmt.Errorf("sqlite: purge %q: %w", key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE "+MetaTable+" SET value = value - ? WHERE name = 'deleted'", n); err != nil {
		return 0, fmt.Errorf("sqlite: purge %q: %w", key, err)
	}
	return n, tx.Commit()
}

// Initialized says what Init found or did.
type Initialized struct {
	// Created: Init made the file or the store's tables in it (they were
	// there otherwise).
	Created bool
	path    string
}

// String says what Init found or did, for a tool's output: "created the
// tables kvbreaker and kvbreaker_meta in PATH (WAL mode)" or "PATH
// already holds the tables kvbreaker and kvbreaker_meta: left as it is".
func (i Initialized) String() string {
	if i.Created {
		return fmt.Sprintf("created the tables %s and %s in %s (WAL mode)", Table, MetaTable, i.path)
	}
	return fmt.Sprintf("%s already holds the tables %s and %s: left as it is", i.path, Table, MetaTable)
}

// Init makes the file at path and the store's tables in it, as Open does,
// unless they are there, and says what it found or did (Initialized): for
// a tool that prepares the file before a fleet starts (kvbreaker init). A
// file that holds a database without the store's tables gets them; opts
// are Open's.
func Init(ctx context.Context, path string, opts ...Option) (Initialized, error) {
	i := Initialized{path: path}
	s, err := Open(ctx, path, append(slices.Clip(opts), WithCreate(false))...)
	if err == nil {
		return i, s.Close()
	}
	if !errors.Is(err, ErrFileMissing) && !errors.Is(err, ErrNotStore) {
		return i, err
	}
	if s, err = Open(ctx, path, opts...); err != nil {
		return i, err
	}
	i.Created = true
	return i, s.Close()
}
