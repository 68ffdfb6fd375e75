// Package mysql is a driver.Store over MySQL or MariaDB (go-sql-driver/mysql
// through database/sql, InnoDB): one row per host, compare-and-swap and
// compare-and-delete as one statement each, and expiry judged by the
// server's clock.
//
// # Rows
//
// Each host is one row of a table (see CreateTable and Schema):
//
//	k           VARBINARY(1024)  primary key: the key's bytes as the Breaker passes it
//	value       MEDIUMBLOB       the encoded record (empty for a tombstone)
//	version     BIGINT           the write's random 63-bit id, new on every write (> 0)
//	expires_at  DATETIME(6)      UTC_TIMESTAMP(6) + ttl on the server; 1000-01-01 for a tombstone
//	purge_at    DATETIME(6)      when the purge may delete the row (see Purging)
//	writes      VARBINARY(40)    the ids of the last five writes, 8 bytes each, newest first
//
// A row is live while expires_at > UTC_TIMESTAMP(6) on the server; Get, List
// and every condition judge it so, on the server's clock, so neither the
// writer's nor the reader's clock enters the expiry (only the record's own
// instants are in the writers' clocks: see Traits). UTC_TIMESTAMP is the
// same whatever a session's time_zone, and MySQL and MariaDB evaluate it
// once per statement, when the statement starts. The key is compared as
// bytes, so List's order is bytewise and any key the Breaker passes is
// stored as it is.
//
// Each write's version is a random number in [1, 2^63): a version is
// never reused for a key in practice (two writes of one key draw the same
// with probability 2^-63), also across delete and re-create, and needs no
// sequence (MySQL 8 has none) nor a counter row every writer would lock.
// A CHECK constraint keeps versions positive where the server enforces it
// (below).
//
// # Foreign rows
//
// The store writes only positive versions, but a server that does not
// enforce CHECK (MySQL 8.0.1 to 8.0.15) or a table made by hand keeps a row
// whose version is 0 or negative, written by another program or by hand.
// Such a live row reads as its value with a version that names exactly the
// row's content: 2^63 plus 60 bits of the MD5 of its value, version,
// expires_at and history. A compare-and-swap or -delete with it replaces
// the row if its content is still the same, and conflicts otherwise, in
// the one statement below, as for a record. Read as its own number, a
// version of 0 would be driver.NoVersion (a live row taken for an absent
// key, so every create conflicts) and a negative one would be compared as a
// record's.
//
// # Statements
//
// A compare-and-swap of a live version and a compare-and-delete are one
// UPDATE each, WHERE k = ? AND version = ? AND expires_at > UTC_TIMESTAMP(6);
// a delete turns the row into a tombstone (expired, empty value, a fresh
// version) rather than removing it, so a resend of the delete can
// recognise it (below); the purge removes it later. A create is one
// INSERT … ON DUPLICATE KEY UPDATE whose every assignment is guarded by
// expires_at <= UTC_TIMESTAMP(6) and this write's id not among the row's
// writes; MySQL and MariaDB evaluate the assignments left to right, each
// seeing the columns assigned before it, so the columns the guard reads are
// assigned last, and the history column's own guard asks whether the row
// now holds this write's version. The statement calls LAST_INSERT_ID(id)
// when it inserts or applies, and LAST_INSERT_ID(0) when the guard fails,
// so its answer's insert id says whether it wrote, whatever the client's
// CLIENT_FOUND_ROWS setting makes of the affected-row count. Every write
// that applies thus costs one round trip. One that does not reads the row
// in a second statement: a conflict then carries the value and version
// read, which may be newer than what the write was compared with (a
// create that finds the key absent again sends itself again, up to three
// times). Statements are prepared once per connection (database/sql's
// Stmt), so each is one round trip, not a prepare and an execute.
//
// # Ambiguous outcomes
//
// A statement may be applied and its answer lost (a connection that breaks
// after the server committed). The store then sends it again, on another
// connection, up to three attempts within the caller's context; a deadlock
// the server reports (1213: the statement was rolled back) is sent again
// too. Every write carries a random 64-bit id, which is also the version
// it writes, and the row keeps the last five ids in writes: a resend whose
// condition fails because of its own first attempt finds its id there and
// reports success, with the version the first attempt got, as if the
// answer had arrived. The create's guard refuses a row that holds the
// call's id, so a resent create is never applied twice. A statement the
// server answered with an error (*mysql.MySQLError) other than a deadlock
// is never resent.
//
// # Purging
//
// Rows that expired, and tombstones, stay until purged. Every
// WithPurgeEvery successful writes (default 1000) the store deletes one batch
// of at most WithPurgeBatch rows (default 1000) whose purge_at is more than
// WithPurgeDelay ago (default one minute), in the background, in one READ
// COMMITTED transaction:
//
//	SELECT k FROM t WHERE purge_at < UTC_TIMESTAMP(6) - delay ORDER BY purge_at LIMIT n FOR UPDATE SKIP LOCKED
//	DELETE FROM t WHERE k = ?     (each of them, by its primary key)
//
// It uses the purge_at index, locks only the rows it deletes (READ
// COMMITTED takes no gap locks), and skips rows a writer holds, so it never
// waits for one nor makes one wait on anything but the rows it removes.
// Purge runs one batch on demand (from a cron job, say). The delay is what
// lets a resent write find its tombstone. SKIP LOCKED needs MariaDB 10.6 or
// MySQL 8.0.1.
//
// # Following
//
// Store does not implement driver.Follower: MySQL and MariaDB push changes
// only through the binary log, which a store would have to tail as a
// replica (with the REPLICATION SLAVE privilege and row-based logging),
// so a Breaker over this store decides from Get.
//
// # MySQL 8
//
// The tests run against MariaDB 10.11. What the statements rely on is, by
// MySQL 8.0's and 8.4's reference manuals, the same there: UTC_TIMESTAMP(6)
// evaluated once at the start of a statement; LAST_INSERT_ID(expr) setting
// the insert id the server returns for an INSERT … ON DUPLICATE KEY UPDATE;
// single-table assignments evaluated left to right; CHECK constraints
// enforced (MySQL 8.0.16 and later; earlier ones parse and ignore them);
// SKIP LOCKED (8.0.1). The statements avoid what MySQL 8 deprecates
// (VALUES() in ON DUPLICATE KEY UPDATE, user variables set in expressions)
// and what MariaDB lacks (the row alias that replaces VALUES()). MySQL 8
// was not run here.
//
// # Errors
//
// Errors other than driver.ErrNotFound and conflicts are *driver.OpError
// ("mysql: get <key>: <cause>") and keep the driver's error types for
// errors.As (*mysql.MySQLError). A refused connection is an
// *driver.UnreachableError, "cannot reach mysql at 127.0.0.1:3306: connection
// refused", matching driver.ErrUnreachable; a server that does not answer is
// bounded by the context. No error of a Store carries the DSN or its
// password (go-sql-driver's errors name neither). A key longer than
// MaxKeyLen bytes is refused before anything is sent.
//
// A Store reads the server's clock (driver.ClockSampler) with SELECT
// UTC_TIMESTAMP(6), to the microsecond.
package mysql

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// The Op of an error of this adapter's own calls (driver.OpError.Op); the
// contract's methods use adapter's Op names.
const (
	opPurge = "purge"
	opDial  = "dial"
)

// DefaultCallTimeout is WithCallTimeout's default; the purge options'
// defaults are adapter's (adapter.DefaultPurge).
const DefaultCallTimeout = 10 * time.Second

// MaxKeyLen is the longest key, in bytes, the table's k column holds: a
// Breaker's keys (at most driver.MaxKeyLen) with a long prefix.
const MaxKeyLen = 1024

// historyDepth is how many write ids a row keeps: a resent write is
// recognised across four writes by others in between.
const historyDepth = 5

// attempts bounds how often one call sends its statement when connections
// break (see "Ambiguous outcomes").
const attempts = 3

// now is the server's clock in every statement.
const now = "UTC_TIMESTAMP(6)"

// tombstoneExpiry is a tombstone's expires_at: expired for every statement
// however early it started (a statement that waited for the delete's row
// lock judges with the instant it started, which may precede the delete's
// own).
const tombstoneExpiry = "'1000-01-01 00:00:00'"

// Store is a driver.Store over one MySQL or MariaDB table. It is safe for
// concurrent use. The zero value is not usable; call New.
type Store struct {
	db       *sql.DB
	table    string
	endpoint string
	cfg      *gomysql.Config // Open's data source name; New's has WithEndpoint's Addr alone
	o        options

	stmts [nStmts]lazyStmt

	purger *adapter.Purger
	// ownDB: Open made the pool, so Close closes it.
	ownDB  bool
	closed atomic.Bool
}

// ErrClosed is the cause of a Store method's *driver.OpError after Close.
var ErrClosed = errors.New("store closed")

type options struct {
	purge       adapter.Purge
	callTimeout time.Duration
	endpoint    string
	maxConns    int
	script      string
	setting     string
}

// apply is opts over the defaults.
func apply(opts []Option) options {
	o := options{purge: adapter.DefaultPurge, callTimeout: DefaultCallTimeout}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// Option configures a Store.
type Option func(*options)

// WithPurgeEvery makes the store purge one batch of expired rows in the
// background after every n successful writes (default
// adapter.DefaultPurge.Every); 0 turns automatic purging off (call Purge
// yourself).
func WithPurgeEvery(n int) Option { return func(o *options) { o.purge.Every = n } }

// WithPurgeBatch bounds the rows one purge deletes (default
// adapter.DefaultPurge.Batch).
func WithPurgeBatch(n int) Option { return func(o *options) { o.purge.Batch = n } }

// WithPurgeDelay sets how long after its expiry a row becomes eligible for
// the purge (default adapter.DefaultPurge.Delay). It must be longer than a
// call may take, so that a resent write still finds its own tombstone.
func WithPurgeDelay(d time.Duration) Option { return func(o *options) { o.purge.Delay = d } }

// WithCallTimeout bounds the purges the store runs on its own (default
// DefaultCallTimeout); calls made by the caller are bounded by its context.
func WithCallTimeout(d time.Duration) Option { return func(o *options) { o.callTimeout = d } }

// WithEndpoint names the server (host:port, or a socket's path) in errors
// that no answer came; a *sql.DB does not say where it connects. Without
// it those errors name no address, and a refused connection is named by
// the address it was refused at.
func WithEndpoint(addr string) Option { return func(o *options) { o.endpoint = addr } }

// WithCreateScript names, in the *CreateDeniedError of the store's
// Prepare, what the one who may create the table is to run: a tool's
// command that prints the SQL, or a migration's file (default: the SQL
// SchemaScript returns).
func WithCreateScript(script string) Option { return func(o *options) { o.script = script } }

// WithSetting names where the data source name came from ("--mysql-dsn",
// "$DATABASE_DSN") in what Store.Explain says to change (default: "the
// data source name").
func WithSetting(name string) Option { return func(o *options) { o.setting = name } }

// WithMaxConns bounds the connections of the pool Open and Dial make (a
// tool that makes a few calls needs two); 0 sets no bound. New's pool is
// the caller's: it does not use it.
func WithMaxConns(n int) Option { return func(o *options) { o.maxConns = n } }

// New returns a Store over table, using db (sql.Open("mysql", dsn), or
// sql.OpenDB of a go-sql-driver Connector) as configured by the caller. The
// table must exist in db's database (see CreateTable and Schema); New sends
// nothing (Ping checks). Every invalid argument or option is reported,
// joined, as a *driver.OptionError. To keep several fleets apart in one
// table, wrap the store with kvbreaker.Prefixed. Close stops the background
// purge and releases the prepared statements; db stays the caller's to
// close.
func New(db *sql.DB, table string, opts ...Option) (*Store, error) {
	o := apply(opts)
	problems := adapter.Problems{Backend: "mysql"}
	bad := problems.Add
	if db == nil {
		bad("db", "nil", `pass a *sql.DB (sql.Open("mysql", dsn))`)
	}
	if err := validTableName(table); err != nil {
		bad("table name", strconv.Quote(table), err.Error())
	}
	o.purge.Check(&problems)
	problems.Positive("WithCallTimeout", o.callTimeout, DefaultCallTimeout)
	if o.maxConns < 0 {
		bad("WithMaxConns", o.maxConns, "give a positive number of connections, or 0 for no bound")
	}
	if err := problems.Err(); err != nil {
		return nil, err
	}
	s := &Store{db: db, table: table, o: o, endpoint: o.endpoint, cfg: &gomysql.Config{Addr: o.endpoint}}
	s.purger = adapter.NewPurger(o.purge.Every, o.callTimeout, s.Purge)
	s.prepare()
	return s, nil
}

// Table returns the table's name.
func (s *Store) Table() string { return s.table }

// DB returns the pool the store uses.
func (s *Store) DB() *sql.DB { return s.db }

// The store's statements, prepared on first use.
const (
	stGet = iota
	stCreate
	stSwap
	stDelete
	stRead
	stList
	stListAll
	stExpiry
	stClock
	nStmts
)

// lazyStmt is a statement prepared on first use: New sends nothing, and a
// server that is down when the store is made is no error until a call.
type lazyStmt struct {
	sql  string
	mu   sync.Mutex
	stmt *sql.Stmt
}

func (l *lazyStmt) get(ctx context.Context, db *sql.DB) (*sql.Stmt, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stmt != nil {
		return l.stmt, nil
	}
	st, err := db.PrepareContext(ctx, l.sql)
	if err != nil {
		return nil, err
	}
	l.stmt = st
	return st, nil
}

func (l *lazyStmt) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stmt != nil {
		_ = l.stmt.Close()
		l.stmt = nil
	}
}

// mine is the SQL condition that the history in col holds the write id
// given as the next parameter, once per slot: the ids sit at fixed
// 8-byte offsets, so an id is never matched across two of them.
func mine(col string) string {
	var b strings.Builder
	b.WriteString("(")
	for i := range historyDepth {
		if i > 0 {
			b.WriteString(" OR ")
		}
		fmt.Fprintf(&b, "SUBSTRING(%s, %d, 8) = ?", col, 8*i+1)
	}
	b.WriteString(")")
	return b.String()
}

func (s *Store) prepare() {
	t := quoteIdent(s.table)
	keep := 8 * (historyDepth - 1)
	// The create: parameters in order are bound by createArgs. LAST_INSERT_ID
	// is unsigned, so it is added to a kept version as signed: a foreign
	// row's negative version stays in range. The guard
	// reads expires_at and writes, so those are assigned last, expires_at
	// before writes, and writes asks whether the row holds this write's
	// version now (it did not before: the guard refuses a row holding its
	// id).
	guard := fmt.Sprintf("(expires_at <= %s AND NOT %s)", now, mine("writes"))
	s.stmts[stCreate].sql = fmt.Sprintf(`INSERT INTO %[1]s (k, value, version, expires_at, purge_at, writes)
VALUES (?, ?, LAST_INSERT_ID(?), %[2]s + INTERVAL ? MICROSECOND, %[2]s + INTERVAL ? MICROSECOND, ?)
ON DUPLICATE KEY UPDATE
	value = IF(%[3]s, ?, value),
	purge_at = IF(%[3]s, %[2]s + INTERVAL ? MICROSECOND, purge_at),
	version = IF(%[3]s, LAST_INSERT_ID(?), version + CAST(LAST_INSERT_ID(0) AS SIGNED)),
	expires_at = IF(%[3]s, %[2]s + INTERVAL ? MICROSECOND, expires_at),
	writes = IF(version = ? AND NOT %[4]s, CONCAT(?, LEFT(writes, %[5]d)), writes)`,
		t, now, guard, mine("writes"), keep)
	// A swap and a delete: one UPDATE of the row at the compared version,
	// or of a foreign row with the compared content. Parameters: those of
	// set, then id (version), id (writes), key, and the two adapter.RowVersionArgs.
	update := func(set string) string {
		return fmt.Sprintf(`UPDATE %[1]s SET %[2]s, version = ?, writes = CONCAT(?, LEFT(writes, %[3]d))
WHERE k = ? AND expires_at > %[4]s AND CASE WHEN version > 0 THEN version = ? ELSE %[5]s = ? END`, t, set, keep, now, foreignHash)
	}
	// Parameters: value, ttl µs, ttl µs.
	s.stmts[stSwap].sql = update(fmt.Sprintf("value = ?, expires_at = %[1]s + INTERVAL ? MICROSECOND, purge_at = %[1]s + INTERVAL ? MICROSECOND", now))
	// A tombstone, purged WithPurgeDelay after the delete. No parameters.
	s.stmts[stDelete].sql = update(fmt.Sprintf("value = '', expires_at = %s, purge_at = %s", tombstoneExpiry, now))
	s.stmts[stGet].sql = fmt.Sprintf(`SELECT value, version, %s FROM %s WHERE k = ? AND expires_at > %s`, foreignOf, t, now)
	// What a write that did not apply reads: the row, whether it is live,
	// and its history.
	s.stmts[stRead].sql = fmt.Sprintf(`SELECT value, version, %s, expires_at > %s, writes FROM %s WHERE k = ?`, foreignOf, now, t)
	s.stmts[stExpiry].sql = fmt.Sprintf(`SELECT CASE WHEN expires_at >= '9999-12-31 00:00:00' THEN -1
	ELSE TIMESTAMPDIFF(MICROSECOND, %[1]s, expires_at) END
FROM %[2]s WHERE k = ? AND expires_at > %[1]s`, now, t)
	// Parameters: prefix, cursor, [end,] limit. The keys under prefix are
	// exactly those in [prefix, end), bytewise: one range of the primary
	// key.
	list := func(end string) string {
		return fmt.Sprintf(`SELECT k FROM %s
WHERE k >= ? AND k > ?%s AND expires_at > %s
ORDER BY k LIMIT ?`, t, end, now)
	}
	s.stmts[stList].sql = list(" AND k < ?")
	s.stmts[stListAll].sql = list("")
	s.stmts[stClock].sql = `SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))`
}

// Traits: atomic conditional writes; relative expiry on the server's clock
// in microseconds; reads on the primary are never stale. See DefaultTraits.
func (s *Store) Traits() driver.Traits { return DefaultTraits() }

// gate is what List and CompareAndSwap check before they contact the
// server.
func (s *Store) gate() adapter.Gate {
	return adapter.Gate{Closed: s.closed.Load, ErrClosed: ErrClosed, Wrap: s.wrap}
}

func (s *Store) wrap(op, key string, err error) error {
	return &driver.OpError{Backend: "mysql", Op: op, Key: key, Err: s.cause(err)}
}

// checkKey refuses a key the k column cannot hold, before anything is
// sent: a server not in strict mode would cut it short and store another
// key.
func checkKey(key string) error {
	if len(key) > MaxKeyLen {
		return fmt.Errorf("key of %d bytes is longer than the table's %d", len(key), MaxKeyLen)
	}
	return nil
}

// queryRow runs statement i with args and scans its one row into dest,
// resending as retry does. sql.ErrNoRows is returned as it is.
func (s *Store) queryRow(ctx context.Context, i int, args []any, dest ...any) error {
	return s.retry(ctx, i, func(st *sql.Stmt) error {
		return st.QueryRowContext(ctx, args...).Scan(dest...)
	})
}

// Get implements driver.Store: the row's value and version if it is live by
// the server's clock, driver.ErrNotFound otherwise.
func (s *Store) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	if s.closed.Load() {
		return nil, driver.NoVersion, s.wrap(adapter.OpGet, key, ErrClosed)
	}
	if err := checkKey(key); err != nil {
		return nil, driver.NoVersion, s.wrap(adapter.OpGet, key, err)
	}
	var (
		value       []byte
		ver, hashed int64
	)
	err := s.queryRow(ctx, stGet, []any{key}, &value, &ver, &hashed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, driver.NoVersion, driver.ErrNotFound
	}
	if err != nil {
		return nil, driver.NoVersion, s.wrap(adapter.OpGet, key, err)
	}
	if value == nil {
		value = []byte{}
	}
	return value, adapter.RowVersion(ver, hashed), nil
}

// foreignHash is, for the row, 60 bits of the MD5 of its value, version,
// expiry and history: what names a foreign row's content (see "Foreign
// rows"), in [0, 2^60).
const foreignHash = `CAST(CONV(LEFT(MD5(CONCAT(LENGTH(value), ':', version, ':', expires_at, ':', HEX(writes), ':', value)), 15), 16, 10) AS SIGNED)`

// foreignOf is what a statement returns beside a row's version: 0 for a
// record (a positive version), its foreignHash otherwise.
const foreignOf = "(CASE WHEN version > 0 THEN 0 ELSE " + foreignHash + " END)"

// idBytes is a write id as the history column holds it.
func idBytes(id int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(id)) }

// holds reports whether the history writes holds id.
func holds(writes []byte, id int64) bool {
	want := idBytes(id)
	for i := 0; i+8 <= len(writes) && i < 8*historyDepth; i += 8 {
		if string(writes[i:i+8]) == string(want) {
			return true
		}
	}
	return false
}

// CompareAndSwap implements driver.Store with one guarded statement (see
// "Statements" in the package doc) and returns the new version. A failed
// condition is a *driver.ConflictError with the current value and version
// (NoVersion when absent or expired). ttl must be positive; it is rounded up
// to microseconds.
func (s *Store) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	if err := s.gate().Swap(key, ttl); err != nil {
		return driver.NoVersion, err
	}
	if err := checkKey(key); err != nil {
		return driver.NoVersion, s.wrap(adapter.OpSwap, key, err)
	}
	if value == nil {
		value = []byte{}
	}
	us := int64((ttl + time.Microsecond - 1) / time.Microsecond)
	id := writeID()
	for range attempts {
		ver, hashed := adapter.RowVersionArgs(old)
		args := []any{value, us, us, id, idBytes(id), key, ver, hashed}
		if old == driver.NoVersion {
			args = createArgs(key, value, id, us)
		}
		st := stSwap
		if old == driver.NoVersion {
			st = stCreate
		}
		applied, err := s.exec(ctx, st, args)
		if err != nil {
			return driver.NoVersion, s.wrap(adapter.OpSwap, key, err)
		}
		if applied {
			s.purger.Wrote()
			return driver.Version(id), nil
		}
		r, err := s.read(ctx, key)
		if err != nil {
			return driver.NoVersion, s.wrap(adapter.OpSwap, key, err)
		}
		switch {
		case r.found && holds(r.writes, id):
			// Our own write, whose answer was lost and whose resend found it.
			s.purger.Wrote()
			return driver.Version(id), nil
		case r.live:
			return driver.NoVersion, &driver.ConflictError{Value: r.value, Version: adapter.RowVersion(r.version, r.hashed)}
		case old != driver.NoVersion:
			return driver.NoVersion, &driver.ConflictError{Version: driver.NoVersion}
		}
		// A create that failed over a row no longer live: it expired or
		// was deleted after the statement; send it again.
	}
	return driver.NoVersion, &driver.ConflictError{Version: driver.NoVersion}
}

// createArgs binds the create statement's parameters.
func createArgs(key string, value []byte, id, us int64) []any {
	ib := idBytes(id)
	args := []any{key, value, id, us, us, ib}
	slots := func() {
		for range historyDepth {
			args = append(args, ib)
		}
	}
	// value, purge_at, version, expires_at: each guarded by the guard,
	// whose history check takes historyDepth parameters, then its own.
	slots()
	args = append(args, value)
	slots()
	args = append(args, us)
	slots()
	args = append(args, id)
	slots()
	args = append(args, us)
	// writes: version = id AND NOT mine(writes), then the new history.
	args = append(args, id)
	slots()
	return append(args, ib)
}

// row is what a write that did not apply reads back.
type row struct {
	found   bool
	value   []byte
	version int64
	hashed  int64 // foreignOf the row
	live    bool
	writes  []byte
}

func (s *Store) read(ctx context.Context, key string) (row, error) {
	var r row
	err := s.queryRow(ctx, stRead, []any{key}, &r.value, &r.version, &r.hashed, &r.live, &r.writes)
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, nil
	}
	if err != nil {
		return row{}, err
	}
	r.found = true
	if r.value == nil {
		r.value = []byte{}
	}
	return r, nil
}

// exec runs write statement i and reports whether it applied: for the
// create, by the insert id the statement set (the write's id, or 0); for an
// UPDATE, by its one affected row (it always changes the version).
func (s *Store) exec(ctx context.Context, i int, args []any) (bool, error) {
	var applied bool
	err := s.retry(ctx, i, func(st *sql.Stmt) error {
		res, err := st.ExecContext(ctx, args...)
		if err != nil {
			return err
		}
		if i == stCreate {
			id, err := res.LastInsertId()
			applied = err == nil && id != 0
			return err
		}
		n, err := res.RowsAffected()
		applied = n == 1
		return err
	})
	return applied, err
}

// CompareAndDelete implements driver.Store with one guarded UPDATE that
// turns the row into a tombstone. It returns driver.ErrNotFound when the key
// is absent or expired and a conflict (as for CompareAndSwap) when another
// version is there. With old == driver.NoVersion there is nothing to
// delete: it only reads.
func (s *Store) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	if s.closed.Load() {
		return s.wrap(adapter.OpDelete, key, ErrClosed)
	}
	if old == driver.NoVersion {
		return adapter.NoVersionDelete(s.Get(ctx, key))
	}
	if err := checkKey(key); err != nil {
		return s.wrap(adapter.OpDelete, key, err)
	}
	id := writeID()
	ver, hashed := adapter.RowVersionArgs(old)
	args := []any{id, idBytes(id), key, ver, hashed}
	applied, err := s.exec(ctx, stDelete, args)
	if err != nil {
		return s.wrap(adapter.OpDelete, key, err)
	}
	if applied {
		s.purger.Wrote()
		return nil
	}
	r, err := s.read(ctx, key)
	switch {
	case err != nil:
		return s.wrap(adapter.OpDelete, key, err)
	case r.found && holds(r.writes, id):
		s.purger.Wrote()
		return nil
	case !r.live:
		return driver.ErrNotFound
	}
	return &driver.ConflictError{Value: r.value, Version: adapter.RowVersion(r.version, r.hashed)}
}

// retry runs send with statement i (prepared on first use, see lazyStmt)
// until it succeeds, fails with an answer from the server (including
// sql.ErrNoRows), finds no server, or attempts run out; a lost answer, and
// a deadlock the server rolled back, is resent (see "Ambiguous outcomes").
func (s *Store) retry(ctx context.Context, i int, send func(*sql.Stmt) error) error {
	return adapter.Resend(attempts, func() error {
		st, err := s.stmts[i].get(ctx, s.db)
		if err != nil {
			return err
		}
		return send(st)
	}, func(err error) bool { return resendable(ctx, err) })
}

// errDeadlock is the server's ER_LOCK_DEADLOCK: the statement's
// transaction was rolled back, so sending it again is safe.
const errDeadlock = 1213

// resendable reports whether err is a connection that failed in a way a new
// one may not, or a deadlock: not another answer, not the context, not a
// refused connection.
func resendable(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil || errors.Is(err, sql.ErrNoRows) {
		return false
	}
	if me, ok := errors.AsType[*gomysql.MySQLError](err); ok {
		return me.Number == errDeadlock
	}
	if _, ok := adapter.DialFailed(err); ok {
		return false // nothing was sent: the caller decides
	}
	return true
}

// writeID returns a random id in [1, 2^63): a positive BIGINT.
func writeID() int64 {
	for {
		if id := rand.Int64(); id != 0 {
			return id
		}
	}
}

// Purge deletes at most one batch (WithPurgeBatch) of rows that expired
// more than WithPurgeDelay ago, without waiting for rows others hold, and
// returns how many it deleted. The store calls it every WithPurgeEvery
// writes; call it yourself (until it returns fewer than a batch) to drain a
// backlog.
func (s *Store) Purge(ctx context.Context) (int64, error) {
	if s.closed.Load() {
		return 0, s.wrap(opPurge, "", ErrClosed)
	}
	n, err := s.purge(ctx)
	if err != nil {
		return 0, s.wrap(opPurge, "", err)
	}
	return n, nil
}

func (s *Store) purge(ctx context.Context) (int64, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it does nothing
	t := quoteIdent(s.table)
	delay := int64(s.o.purge.Delay / time.Microsecond)
	rows, err := tx.QueryContext(ctx, fmt.Sprintf(`SELECT k FROM %s WHERE purge_at < %s - INTERVAL ? MICROSECOND
ORDER BY purge_at LIMIT ? FOR UPDATE SKIP LOCKED`, t, now), delay, s.o.purge.Batch)
	if err != nil {
		return 0, err
	}
	var keys []string
	for rows.Next() {
		var k []byte
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return 0, err
		}
		keys = append(keys, string(k))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(keys) == 0 {
		return 0, tx.Commit()
	}
	// Each by its primary key: a statement naming the whole list may scan
	// the table (the optimizer's choice on a small one) and wait for a row
	// another holds, which the SKIP LOCKED above avoided.
	del, err := tx.PrepareContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE k = ?", t))
	if err != nil {
		return 0, err
	}
	defer del.Close()
	var n int64
	for _, k := range keys {
		res, err := del.ExecContext(ctx, k)
		if err != nil {
			return 0, err
		}
		m, err := res.RowsAffected()
		if err != nil {
			return 0, err
		}
		n += m
	}
	return n, tx.Commit()
}

// Ping checks that the server answers and the table exists, as a command
// does before its first call: a refused connection is an
// *driver.UnreachableError, a missing table an error matching ErrNoTable.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return s.wrap(opDial, "", ErrClosed)
	}
	rows, err := s.db.QueryContext(ctx, fmt.Sprintf("SELECT 1 FROM %s LIMIT 0", quoteIdent(s.table)))
	if me, ok := errors.AsType[*gomysql.MySQLError](err); ok && me.Number == errNoSuchTable {
		// It reads as the explanation alone, and matches both ErrNoTable
		// and the server's refusal.
		return adapter.Explained(errors.Join(ErrNoTable, err), "mysql: table %s does not exist%s (error %d)", s.table, s.where(), me.Number)
	}
	if err != nil {
		return s.wrap(opDial, "", err)
	}
	rows.Close()
	return nil
}

// errNoSuchTable is ER_NO_SUCH_TABLE.
const errNoSuchTable = 1146

// ErrNoTable is matched (errors.Is) by Ping's error when the table does
// not exist; the error names the table, the database and the server (those
// Open was given) and unwraps to the driver's *mysql.MySQLError. It is
// adapter.ErrNoTable, which every backend's missing table matches.
var ErrNoTable = adapter.ErrNoTable

// Close waits for a background purge to end, starts no more and closes the
// prepared statements; it closes the pool if Open made it (New's pool is
// the caller's). Later calls fail with ErrClosed, sending nothing.
func (s *Store) Close() error {
	// After the purger: the background purge Close waits for calls Purge.
	s.purger.Close()
	s.closed.Store(true)
	for i := range s.stmts {
		s.stmts[i].close()
	}
	if s.ownDB {
		return s.db.Close()
	}
	return nil
}

// PurgeKey deletes key's row whatever it holds (a record, a tombstone, or
// an expired row kept until Purge) and returns how many rows it deleted, 0
// or 1. It bypasses the compare-and-swap a Breaker relies on: it is for a
// tool that cleans up keys it wrote itself (kvbreaker check).
func (s *Store) PurgeKey(ctx context.Context, key string) (int64, error) {
	if s.closed.Load() {
		return 0, fmt.Errorf("mysql: purge %q: %w", key, ErrClosed)
	}
	res, err := s.db.ExecContext(ctx, "DELETE FROM `"+s.table+"` WHERE k = ?", key) // table passed Schema's check in New
	if err != nil {
		return 0, fmt.Errorf("mysql: purge %q: %w", key, err)
	}
	return res.RowsAffected()
}
