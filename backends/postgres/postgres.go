// Package postgres is a driver.Store over PostgreSQL (pgx v5, a
// *pgxpool.Pool): one row per host, compare-and-swap and compare-and-delete
// as one statement each, and expiry judged by the server's clock.
//
// # Rows
//
// Each host is one row of a table (see CreateTable and Schema):
//
//	key         text COLLATE "C"  primary key: the key as the Breaker passes it
//	value       bytea             the encoded record (empty for a tombstone)
//	version     bigint            from the table's sequence, new on every write
//	expires_at  timestamptz       the server's now() + ttl; -infinity for a tombstone
//	writes      bigint[]          the random ids of the last writes, newest first (≤ 5)
//	versions    bigint[]          the versions those writes got, in the same order
//
// A row is live while expires_at > now() on the server; Get, List and every
// condition judge it so, on the server's clock, so neither the writer's nor
// the reader's clock enters the expiry (only the record's own instants are
// in the writers' clocks: see Traits). Versions come from a sequence, so they
// are never reused, also across delete and re-create.
//
// # Foreign rows
//
// The store writes only positive versions. A live row whose version is 0 or
// negative (written by another process, or by hand) reads as its value with
// a version that names exactly that row's content: 2^63 plus 60 bits of the
// MD5 of its value, version, expires_at and history. A compare-and-swap or
// -delete with it replaces the row if its content is still the same, and
// conflicts otherwise, in the one statement below. A history array that is
// not one-dimensional is taken as empty, and a NULL in it matches no write,
// so neither makes a statement fail. A row whose expires_at is 'infinity'
// is live until the next write, which sets its own expiry; Expiry reports
// it as driver.NoExpiry.
//
// # Statements
//
// CompareAndSwap is one INSERT … ON CONFLICT (key) DO UPDATE whose every SET
// is guarded by the condition
//
//	create (old == driver.NoVersion):  expires_at <= now() AND NOT (this write's id = ANY(writes))
//	swap (old == v):                  version = v AND expires_at > now()
//
// so that the statement always locks and returns the row as it stands after
// it, under the lock: on a failed condition the row is rewritten unchanged
// and RETURNING gives the current value and version for the
// *driver.ConflictError, with no second read and no window between the
// condition and the answer. The price is that a failed compare writes a row
// version of its own (as a successful one does). CompareAndDelete is one
// UPDATE guarded the same way that turns the row into a tombstone (expired
// at once, empty value, a fresh version) rather than removing it, so a
// resend of the delete can recognise it (below); the purge removes it later.
//
// # Ambiguous outcomes
//
// A statement may be applied and its answer lost (a connection that breaks
// after the server committed). The store then sends it again, on another
// connection, up to three attempts within the caller's context. Every write
// carries a random 64-bit id that the row keeps in writes (with its version
// in versions) for its next four writes: a resend whose condition fails
// because of its own first attempt finds its id there and reports success,
// with the version the first attempt got, as if the answer had arrived. The
// create condition refuses a row that holds the call's id, so a resent
// create is never applied twice. A statement the server answered with an
// error (*pgconn.PgError) is never resent.
//
// # Purging
//
// Rows that expired, and tombstones, stay until purged. Every
// WithPurgeEvery successful writes (default 1000) the store deletes one batch
// of at most WithPurgeBatch rows (default 1000) that expired more than
// WithPurgeDelay ago (default one minute), in the background:
//
//	DELETE FROM t WHERE ctid IN (SELECT ctid FROM t WHERE purge_at < now() - delay
//	                             LIMIT n FOR UPDATE SKIP LOCKED)
//
// It uses the purge_at index, locks only the rows it deletes, and skips
// rows a writer holds, so it never waits for one nor makes one wait on
// anything but the rows it removes. Purge runs one batch on demand (from a
// cron job, say). The delay is what lets a resent write find its tombstone.
//
// # Following
//
// Store implements driver.Follower with LISTEN/NOTIFY. Schema's trigger
// (created by CreateTable and "kvbreaker init") notifies channel
// Channel(table), "<table>_changes", of the key of every row a statement
// inserts, changes or deletes, in the writing transaction: PostgreSQL
// delivers notifications in the order their transactions commit. It sends
// nothing for a failed compare (which rewrites the row unchanged) or for
// the purge of a tombstone (its delete was notified), and '*' for a
// TRUNCATE. A key longer than 7,900 bytes (never one a Breaker writes) is
// notified by its first 1,000 characters, so that the payload stays below
// PostgreSQL's 8,000 bytes and the write never fails for it; a follower
// whose prefix it may fall under resynchronises.
//
// Follow takes one connection out of the pool (Acquire and Hijack: it is
// made with the pool's hooks and the pool opens another in its place),
// names it "kvbreaker follow <table>" in application_name (after the
// pool's own name, if any), LISTENs, and only then reads the snapshot: the
// prefix's live rows as Get reads them (expiry by the server's now(),
// tombstones hidden), then Synced at the instant before the snapshot was
// asked for. Each notified key under the prefix is then delivered as
// driver.ChangeStale (once per key of the notifications queued together):
// Follow reads nothing after the snapshot, and a Breaker's mirror reads
// such a key once, when it next needs it. Each follower costs a
// connection, and its snapshot.
//
// Every heartbeat the follower notifies a channel of its own from the
// pool, with a fresh payload; PostgreSQL keeps one queue for all
// channels, so it comes back after the notifications of every transaction
// that committed before it was sent, and its arrival is Synced{At: when it
// was sent}. A heartbeat not back within max(2×heartbeat, 1 s), an error or
// close of the listening connection or a TRUNCATE is
// ChangeLost, once per outage, and then a resynchronisation (a new
// connection, LISTEN, snapshot), retried with a backoff of 50 ms doubling
// to 2 s while the server cannot be reached. Each attempt's connection and
// snapshot is bounded by WithCallTimeout. Follow
// returns only when its context ends (ctx's error), or at once when the
// table lacks the trigger (an error matching errors.ErrUnsupported that
// names "kvbreaker init") or the server refuses (no table, a missing
// privilege, a prefix that is not UTF-8). The listening connection is closed
// and every goroutine it started has ended when it returns.
//
// FollowDemand (driver.DemandFollower, which a Breaker's mirror uses) is
// Follow, but it beats only when asked and its newest Synced is older
// than the heartbeat (plus a random eighth of it): the beat is one
// statement from the pool that notifies the table's channel with the
// server's clock_timestamp() in the payload ('b', never a trigger's
// payload), so every follower of the table receives it in commit order
// and converts it to its own clock with a sample of the server's clock
// (SELECT clock_timestamp(), at most every 30 s); a beat that converts to
// an instant after its arrival is dropped. A fleet of mirrors sends about
// one beat per heartbeat while any of them decides, and none while idle.
//
// Rows expire by the server's clock without any statement, so a row that
// expires sends nothing: the mirror keeps it until the purge deletes it
// (WithPurgeDelay after its expiry), whose DELETE is notified and arrives as
// Stale. A Breaker's record past its TTL has no failure left inside
// FailureWindow and its restraint is over, so (checked against
// internal/machine and Breaker) deciding on it costs one refused call and
// changes nothing: Allow on a closed one sends; Allow on a restrained one
// claims the probe with a compare-and-swap the store refuses (its
// condition wants expires_at > now()), then decides on the absent record;
// Success's compare-and-delete finds nothing and reports nothing; Failure on
// a closed one is refused and rewritten from the absent record. Except one
// case: Failure on an open record (restrained, not probing) writes nothing
// by design, so on an expired one it is ignored where the store, holding no
// record, would count it; a mirror must not decide a Failure from an open
// record whose restraint is over.
//
// Costs and limits, checked on PostgreSQL 15 on loopback: the trigger adds
// about 10 µs to a compare-and-swap's 55 µs (median, one writer, no
// listener); a write is delivered to a follower a median 0.13 ms and a
// 99th percentile 1.6 ms after the writer has its answer (go test -run
// TestFollowDelay -v). PostgreSQL keeps notifications until every
// listener has read them, in a queue of 8 GB by default: a follower that
// stops reading (its process paused) holds that queue, and once it is
// full writes fail; pg_notification_queue_usage() shows how full it is.
// Any role that can connect to the database may LISTEN on the channel and
// learn the keys written (hosts), and may NOTIFY on it, which costs the
// followers a read each and changes nothing they deliver.
//
// # Replicas
//
// The store must be given a pool on the primary: the conditional writes need
// it, and a read on a streaming replica may lag the primary (by
// pg_stat_replication's replay_lag) and so return a version already
// replaced, which Breaker would detect only at its next write. A store
// reading from a replica would have to declare that lag as
// Traits.ReadStaleness; this package does not offer it. Expiry judged by
// now() is unaffected: a replica's clock enters only through its reads.
//
// # Errors
//
// Errors other than driver.ErrNotFound and conflicts are *driver.OpError
// ("postgres: get <key>: <cause>") and keep pgx's error types for errors.As
// (*pgconn.PgError). A refused connection is an *driver.UnreachableError, "cannot
// reach postgres at 127.0.0.1:5432: connection refused", matching
// driver.ErrUnreachable; a server that does not answer is bounded by the context.
// No error of a Store carries the pool's password (pgx's connect errors
// name the user and database only). ParseConfig parses a connection string
// as pgxpool.ParseConfig does, with errors that never show a password
// (pgx's quote the string, and miss "password = secret").
//
// A Store reads the server's clock (driver.ClockSampler) with SELECT
// clock_timestamp(), to the microsecond.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

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

// historyDepth is how many write ids (and their versions) a row keeps: a
// resent write is recognised across four writes by others in between.
const historyDepth = 5

// attempts bounds how often one call sends its statement when connections
// break (see "Ambiguous outcomes").
const attempts = 3

// Store is a driver.Store over one PostgreSQL table. It is safe for
// concurrent use. The zero value is not usable; call New.
type Store struct {
	pool     *pgxpool.Pool
	table    string
	endpoint string
	role     string // the role the pool connects as, for errors
	o        options

	sqlGet, sqlCreate, sqlSwap, sqlDelete, sqlList, sqlListAll, sqlPurge, sqlExpiry string

	purger *adapter.Purger
	// ownPool: Open made the pool, so Close closes it.
	ownPool bool
	closed  atomic.Bool
}

// ErrClosed is the cause of a Store method's *driver.OpError after Close.
var ErrClosed = errors.New("store closed")

type options struct {
	purge       adapter.Purge
	callTimeout time.Duration
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

// WithCreateScript names, in the *CreateDeniedError of the store's
// Prepare, what the one who may create the table is to run: a tool's
// command that prints the SQL, or a migration's file (default: the SQL
// SchemaScript returns).
func WithCreateScript(script string) Option { return func(o *options) { o.script = script } }

// WithSetting names where the connection string came from ("--postgres-url",
// "$DATABASE_URL") in what Store.Explain says to change (default: "the
// connection string").
func WithSetting(name string) Option { return func(o *options) { o.setting = name } }

// WithMaxConns bounds the connections of the pool Open and Dial make (a
// tool that makes a few calls needs two); 0 leaves pgxpool's bound (its
// configuration's MaxConns). New's pool is the caller's: it ignores it.
func WithMaxConns(n int) Option { return func(o *options) { o.maxConns = n } }

// New returns a Store over table, using pool as configured by the caller.
// The table must exist (see CreateTable and Schema); New sends nothing (Ping
// checks). Every invalid argument or option is reported, joined, as a
// *driver.OptionError. To keep several fleets apart in one table, wrap the
// store with kvbreaker.Prefixed. Close stops the background purge; the
// pool stays the caller's to close.
func New(pool *pgxpool.Pool, table string, opts ...Option) (*Store, error) {
	o := apply(opts)
	problems := adapter.Problems{Backend: "postgres"}
	bad := problems.Add
	if pool == nil {
		bad("pool", "nil", "pass a *pgxpool.Pool (pgxpool.New)")
	}
	if err := validTableName(table); err != nil {
		bad("table name", strconv.Quote(table), err.Error())
	}
	o.purge.Check(&problems)
	problems.Positive("WithCallTimeout", o.callTimeout, DefaultCallTimeout)
	if o.maxConns < 0 {
		bad("WithMaxConns", o.maxConns, "give a positive number of connections, or 0 for pgxpool's default")
	}
	if err := problems.Err(); err != nil {
		return nil, err
	}
	s := &Store{pool: pool, table: table, o: o, endpoint: endpointOf(pool.Config().ConnConfig), role: pool.Config().ConnConfig.User}
	s.purger = adapter.NewPurger(o.purge.Every, o.callTimeout, s.Purge)
	s.prepare()
	return s, nil
}

func endpointOf(c *pgx.ConnConfig) string {
	if len(c.Host) > 0 && c.Host[0] == '/' {
		return c.Host + "/.s.PGSQL." + strconv.Itoa(int(c.Port))
	}
	return net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))
}

// Table returns the table's name.
func (s *Store) Table() string { return s.table }

// Pool returns the pool the store uses.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// hist is a row's history array as the statements use it: itself when it
// is one-dimensional, else empty (a row another process wrote).
func hist(col string) string {
	return fmt.Sprintf("(CASE WHEN array_ndims(%[1]s) = 1 THEN %[1]s ELSE '{}'::bigint[] END)", col)
}

// foreignHash is, for the row aliased a, 60 bits of the MD5 of its value,
// version, expiry and history: what names a foreign row's content (see
// "Foreign rows"), in [0, 2^60).
func foreignHash(a string) string {
	return fmt.Sprintf(`('x' || substr(md5(convert_to(octet_length(%[1]s.value)::text || ':' || %[1]s.version::text || ':' || `+
		`extract(epoch from %[1]s.expires_at)::text || ':' || %[1]s.writes::text || ':' || %[1]s.versions::text, 'UTF8') || %[1]s.value), 1, 15))::bit(60)::bigint`, a)
}

// foreignOf is what a statement returns beside a row's version: 0 for a
// record (a positive version), its foreignHash otherwise.
func foreignOf(a string) string {
	return fmt.Sprintf("(CASE WHEN %[1]s.version > 0 THEN 0 ELSE %[2]s END)", a, foreignHash(a))
}

// guarded returns the SET list of the guarded upsert: each column takes the
// new value when cond holds and keeps its own otherwise.
func guarded(cond string) string {
	set := func(col, val string) string {
		return fmt.Sprintf("%s = CASE WHEN %s THEN %s ELSE t.%s END", col, cond, val, col)
	}
	return set("value", "EXCLUDED.value") + ",\n\t" +
		set("version", "EXCLUDED.version") + ",\n\t" +
		set("expires_at", "EXCLUDED.expires_at") + ",\n\t" +
		set("purge_at", "EXCLUDED.purge_at") + ",\n\t" +
		set("writes", fmt.Sprintf("(EXCLUDED.writes || %s)[1:%d]", hist("t.writes"), historyDepth)) + ",\n\t" +
		set("versions", fmt.Sprintf("(EXCLUDED.versions || %s)[1:%d]", hist("t.versions"), historyDepth))
}

// returning is what every write returns: the row as it stands after the
// statement, whether it is live, the version this call's write got if the
// row holds it (NULL otherwise), and the row's foreignOf.
var returning = `RETURNING t.version, t.value, t.expires_at > now(), ` +
	`CASE WHEN array_ndims(t.writes) = 1 AND array_ndims(t.versions) = 1 THEN t.versions[array_position(t.writes, $4::bigint)] END, ` +
	foreignOf("t")

func (s *Store) prepare() {
	t, seq := quoteIdent(s.table), quoteIdent(s.table+seqSuffix)
	// $1 key, $2 value, $3 ttl in µs, $4 write id, $5 old version (0
	// when it names a foreign row), $6 the foreign row's hash it names (-1
	// when none).
	upsert := func(cond string) string {
		return fmt.Sprintf(`INSERT INTO %[1]s AS t (key, value, version, expires_at, purge_at, writes, versions)
SELECT $1::text, $2::bytea, n.v, now() + $3::bigint * interval '1 microsecond', now() + $3::bigint * interval '1 microsecond', ARRAY[$4::bigint], ARRAY[n.v]
FROM (SELECT nextval('%[2]s') AS v) n
ON CONFLICT (key) DO UPDATE SET
	%[3]s
%[4]s`, t, seq, guarded(cond), returning)
	}
	// The create's condition names $5 (0) and $6 (-1) too, so both take
	// the same arguments. A NULL among the writes (a row another process
	// wrote) is no match.
	s.sqlCreate = upsert(`(t.expires_at <= now() AND NOT coalesce($4::bigint = ANY(t.writes), false) AND $5::bigint = 0 AND $6::bigint < 0)`)
	// A swap and a delete update the row in place: an absent key is not
	// inserted (no row returned: a conflict with NoVersion, or not found).
	update := func(value, expiresAt, purgeAt string) string {
		cond := `(t.expires_at > now() AND CASE WHEN t.version > 0 THEN t.version = $5::bigint ELSE ` + foreignHash("t") + ` = $6::bigint END)`
		return fmt.Sprintf(`UPDATE %[1]s AS t SET
	value = CASE WHEN %[3]s THEN %[5]s ELSE t.value END,
	version = CASE WHEN %[3]s THEN n.v ELSE t.version END,
	expires_at = CASE WHEN %[3]s THEN %[6]s ELSE t.expires_at END,
	purge_at = CASE WHEN %[3]s THEN %[8]s ELSE t.purge_at END,
	writes = CASE WHEN %[3]s THEN (ARRAY[$4::bigint] || %[9]s)[1:%[4]d] ELSE t.writes END,
	versions = CASE WHEN %[3]s THEN (ARRAY[n.v] || %[10]s)[1:%[4]d] ELSE t.versions END
FROM (SELECT nextval('%[2]s') AS v) n
WHERE t.key = $1::text
%[7]s`, t, seq, cond, historyDepth, value, expiresAt, returning, purgeAt, hist("t.writes"), hist("t.versions"))
	}
	ttl := `now() + $3::bigint * interval '1 microsecond'`
	s.sqlSwap = update(`$2::bytea`, ttl, ttl)
	// A delete turns the row into a tombstone, expired for every statement
	// however early its now() (a statement that waited for the delete's
	// row lock judges with the instant it started, which may precede the
	// delete's own now()); it is purged WithPurgeDelay after the delete.
	// It takes the same arguments as a swap ($2 and $3 unused but typed).
	s.sqlDelete = update(`''::bytea`, `'-infinity'::timestamptz`, `now() + least($3::bigint, 0) * interval '1 microsecond' + (octet_length($2::bytea) * interval '0 s')`)
	s.sqlGet = fmt.Sprintf(`SELECT value, version, %s FROM %s AS t WHERE key = $1 AND expires_at > now()`, foreignOf("t"), t)
	s.sqlExpiry = fmt.Sprintf(`SELECT CASE WHEN expires_at = 'infinity' THEN -1
	ELSE greatest(0, floor(extract(epoch from expires_at - now()) * 1000000))::bigint END
FROM %s WHERE key = $1 AND expires_at > now()`, t)
	// $1 prefix, $2 cursor, $3 limit, $4 prefixEnd(prefix): the keys under
	// prefix are exactly those in [$1, $4) in the "C" collation, a range
	// of the primary key also in a generic plan (where starts_with or LIKE
	// with a parameter bounds nothing). sqlListAll is for a prefix without
	// an end.
	list := func(end string) string {
		return fmt.Sprintf(`SELECT key FROM %s
WHERE key >= $1::text%s AND key > $2::text AND expires_at > now()
ORDER BY key LIMIT $3`, t, end)
	}
	s.sqlList = list(" AND key < $4::text")
	s.sqlListAll = list("")
	s.sqlPurge = fmt.Sprintf(`DELETE FROM %[1]s WHERE ctid IN (
	SELECT ctid FROM %[1]s WHERE purge_at < now() - $1::bigint * interval '1 microsecond'
	LIMIT $2 FOR UPDATE SKIP LOCKED)`, t)
}

// Traits: atomic conditional writes; relative expiry on the server's clock
// in microseconds; reads on the primary are never stale. See DefaultTraits.
func (s *Store) Traits() driver.Traits { return DefaultTraits() }

// gate is what List and Follow check before they contact the server.
func (s *Store) gate() adapter.Gate {
	return adapter.Gate{Closed: s.closed.Load, ErrClosed: ErrClosed, Wrap: s.wrap}
}

func (s *Store) wrap(op, key string, err error) error {
	return &driver.OpError{Backend: "postgres", Op: op, Key: key, Err: s.cause(err)}
}

// Get implements driver.Store: the row's value and version if it is live by
// the server's clock, driver.ErrNotFound otherwise.
func (s *Store) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	if s.closed.Load() {
		return nil, driver.NoVersion, s.wrap(adapter.OpGet, key, ErrClosed)
	}
	var (
		value       []byte
		ver, hashed int64
	)
	err := s.retry(ctx, func() error {
		return s.pool.QueryRow(ctx, s.sqlGet, key).Scan(&value, &ver, &hashed)
	})
	if errors.Is(err, pgx.ErrNoRows) {
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

// result is what a write returns.
type result struct {
	version int64
	value   []byte
	live    bool
	mine    *int64 // the version this call's write got, if the row holds it
	hashed  int64  // the row's foreignHash, or 0 for a record
}

// CompareAndSwap implements driver.Store with one guarded upsert (see
// "Statements" in the package doc) and returns the new version. A failed
// condition is a *driver.ConflictError with the current value and version
// (NoVersion when absent or expired). ttl must be positive; it is rounded up
// to microseconds.
func (s *Store) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	if s.closed.Load() {
		return driver.NoVersion, s.wrap(adapter.OpSwap, key, ErrClosed)
	}
	return s.compareAndSwap(ctx, s.pool, s.retry, key, old, value, ttl)
}

// querier is what a statement is sent on: the pool, or in tests a
// transaction whose now() they chose.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// sender sends a statement: retry for the pool; once on a transaction,
// which a broken connection ends anyway.
type sender func(ctx context.Context, send func() error) error

func (s *Store) compareAndSwap(ctx context.Context, q querier, via sender, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	if ttl <= 0 {
		return driver.NoVersion, s.wrap(adapter.OpSwap, key, fmt.Errorf("ttl %v is not positive", ttl))
	}
	if value == nil {
		value = []byte{}
	}
	sql := s.sqlSwap
	if old == driver.NoVersion {
		sql = s.sqlCreate
	}
	us := (ttl + time.Microsecond - 1) / time.Microsecond
	id := writeID()
	var r result
	o5, o6 := adapter.RowVersionArgs(old)
	err := via(ctx, func() error {
		return q.QueryRow(ctx, sql, key, value, int64(us), id, o5, o6).Scan(&r.version, &r.value, &r.live, &r.mine, &r.hashed)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.NoVersion, &driver.ConflictError{Version: driver.NoVersion} // a swap of an absent key
	}
	if err != nil {
		return driver.NoVersion, s.wrap(adapter.OpSwap, key, err)
	}
	if r.mine != nil {
		s.purger.Wrote()
		return driver.Version(*r.mine), nil
	}
	if !r.live {
		return driver.NoVersion, &driver.ConflictError{Version: driver.NoVersion}
	}
	if r.value == nil {
		r.value = []byte{}
	}
	return driver.NoVersion, &driver.ConflictError{Value: r.value, Version: adapter.RowVersion(r.version, r.hashed)}
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
	return s.compareAndDelete(ctx, s.pool, s.retry, key, old)
}

func (s *Store) compareAndDelete(ctx context.Context, q querier, via sender, key string, old driver.Version) error {
	if old == driver.NoVersion {
		return adapter.NoVersionDelete(s.Get(ctx, key))
	}
	id := writeID()
	var r result
	o5, o6 := adapter.RowVersionArgs(old)
	err := via(ctx, func() error {
		return q.QueryRow(ctx, s.sqlDelete, key, []byte{}, int64(0), id, o5, o6).Scan(&r.version, &r.value, &r.live, &r.mine, &r.hashed)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return driver.ErrNotFound
	case err != nil:
		return s.wrap(adapter.OpDelete, key, err)
	case r.mine != nil:
		s.purger.Wrote()
		return nil
	case !r.live:
		return driver.ErrNotFound
	}
	if r.value == nil {
		r.value = []byte{}
	}
	return &driver.ConflictError{Value: r.value, Version: adapter.RowVersion(r.version, r.hashed)}
}

// Expiry implements driver.ExpiryReader: the time until the row's
// expires_at by the server's clock, to the microsecond; driver.NoExpiry when
// expires_at is 'infinity' (which only another process writes); and
// driver.ErrNotFound when Get reads the key as absent (no row, an expired
// one, or a tombstone), though the row stays until purged.
func (s *Store) Expiry(ctx context.Context, key string) (time.Duration, error) {
	if s.closed.Load() {
		return 0, s.wrap(adapter.OpExpiry, key, ErrClosed)
	}
	var us int64
	err := s.retry(ctx, func() error {
		return s.pool.QueryRow(ctx, s.sqlExpiry, key).Scan(&us)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, driver.ErrNotFound
	case err != nil:
		return 0, s.wrap(adapter.OpExpiry, key, err)
	}
	return adapter.RowExpiry(us), nil
}

// retry runs send until it succeeds, fails with an answer from the server
// (including pgx.ErrNoRows), finds no server, or attempts run out; a lost
// answer is resent (see "Ambiguous outcomes").
func (s *Store) retry(ctx context.Context, send func() error) error {
	return adapter.Resend(attempts, send, func(err error) bool { return resendable(ctx, err) })
}

// resendable reports whether err is a connection that failed in a way a new
// one may not: not an answer, not the context, not a refused connection.
func resendable(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil || errors.Is(err, pgx.ErrNoRows) {
		return false
	}
	if _, ok := errors.AsType[*pgconn.PgError](err); ok {
		return false
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return false
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return false // nothing was sent: the caller decides
	}
	return true
}

// writeID returns a random non-zero write id.
func writeID() int64 {
	for {
		if id := int64(rand.Uint64()); id != 0 {
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
	tag, err := s.pool.Exec(ctx, s.sqlPurge, int64(s.o.purge.Delay/time.Microsecond), s.o.purge.Batch)
	if err != nil {
		return 0, s.wrap(opPurge, "", err)
	}
	return tag.RowsAffected(), nil
}

// Ping checks that the server answers and the table exists, as a command
// does before its first call: a refused connection is an
// *driver.UnreachableError, a missing table an error matching ErrNoTable.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return s.wrap(opDial, "", ErrClosed)
	}
	_, err := s.pool.Exec(ctx, fmt.Sprintf("SELECT 1 FROM %s LIMIT 0", quoteIdent(s.table)))
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == undefinedTable {
		// It reads as the explanation alone, and matches both ErrNoTable
		// and the server's refusal.
		return adapter.Explained(errors.Join(ErrNoTable, err), "postgres: table %s does not exist in database %s at %s (SQLSTATE %s)",
			s.table, s.pool.Config().ConnConfig.Database, s.endpoint, pe.Code)
	}
	if err != nil {
		return s.wrap(opDial, "", err)
	}
	return nil
}

// undefinedTable is PostgreSQL's SQLSTATE 42P01.
const undefinedTable = "42P01"

// ErrNoTable is matched (errors.Is) by Ping's error when the table does
// not exist; the error names the table, the database and the server, and
// unwraps to the server's *pgconn.PgError. It is adapter.ErrNoTable, which
// every backend's missing table matches.
var ErrNoTable = adapter.ErrNoTable

// Close waits for a background purge to end and starts no more; it closes
// the pool if Open made it (New's pool is the caller's). Later calls fail
// with ErrClosed, sending nothing; a Follow already running goes on until
// its context ends.
func (s *Store) Close() error {
	// After the purger: the background purge Close waits for calls Purge.
	s.purger.Close()
	s.closed.Store(true)
	if s.ownPool {
		s.pool.Close()
	}
	return nil
}

// PurgeKey deletes key's row whatever it holds (a record, a tombstone, or
// an expired row kept until Purge) and returns how many rows it deleted, 0
// or 1. It bypasses the compare-and-swap a Breaker relies on: it is for a
// tool that cleans up keys it wrote itself (kvbreaker check).
func (s *Store) PurgeKey(ctx context.Context, key string) (int64, error) {
	if s.closed.Load() {
		return 0, fmt.Errorf("postgres: purge %q: %w", key, ErrClosed)
	}
	tag, err := s.pool.Exec(ctx, "DELETE FROM "+quoteIdent(s.table)+" WHERE key = $1", key)
	if err != nil {
		return 0, fmt.Errorf("postgres: purge %q: %w", key, err)
	}
	return tag.RowsAffected(), nil
}
