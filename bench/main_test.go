package bench

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	kvsdk "github.com/cloudflare/cloudflare-go/v6/kv"
	"github.com/cloudflare/cloudflare-go/v6/option"
	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	natsgo "github.com/nats-io/nats.go"
	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/cloudflarekv"
	dynstore "github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/backends/mysql"
	kvnats "github.com/kvbreaker/kvbreaker/backends/nats"
	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/backends/sqlite"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/testservers/dynalite"
	"github.com/kvbreaker/kvbreaker/internal/testservers/etcdtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/mariadbtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/miniflare"
	"github.com/kvbreaker/kvbreaker/internal/testservers/natstest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/pgtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/servers"
)

// The real servers, started once by TestMain for the tests and benchmarks
// that measure round trips: etcd, redis-server, PostgreSQL, MariaDB and
// nats-server with JetStream (child processes), dynalite and Miniflare (node
// child processes), all on 127.0.0.1; and the SQLite file, in a temporary
// directory.
var (
	etcdSrv   *etcdtest.Server
	dynSrv    *dynalite.Server
	cfSrv     *miniflare.Server
	redisSrv  *redistest.Server
	pgSrv     *pgtest.Server
	mariaSrv  *mariadbtest.Server
	natsSrv   *natstest.Server
	dynClient *dynamodb.Client // uncounted, for CreateTable
	sqliteDir string
)

const pgTable = "kvbreaker_bench"

const mysqlTable = "kvbreaker_bench"

const dynTable = "kvbreaker-bench"

const natsBucket = "kvbreaker_bench"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Without miniflare.WriteLimit: the adapters pace their own writes to
	// one key (1/s); the server's limit would only add 429s between the
	// separate stores these tests use as separate workers.
	set, err := servers.Start(ctx)
	if err == nil {
		etcdSrv, dynSrv, cfSrv = set.Etcd, set.Dynalite, set.Miniflare
		dynClient = newClient(dynSrv.Endpoint)
		err = dynstore.CreateTable(ctx, dynClient, dynTable)
	}
	if err == nil {
		redisSrv, err = redistest.Start(ctx)
	}
	if err == nil {
		pgSrv, err = pgtest.Start(ctx)
	}
	if err == nil {
		err = createPGTable(ctx)
	}
	if err == nil {
		// The driver logs broken connections on its own; the tests
		// check their errors.
		_ = gomysql.SetLogger(log.New(io.Discard, "", 0))
		mariaSrv, err = mariadbtest.Start(ctx)
	}
	if err == nil {
		err = createMySQLTable(ctx)
	}
	if err == nil {
		natsSrv, err = natstest.Start(ctx)
	}
	if err == nil {
		err = createNATSBucket(ctx)
	}
	if err == nil {
		sqliteDir, err = os.MkdirTemp("", "kvbreaker-bench-sqlite-")
	}
	stopAll := func() {
		if set != nil {
			set.Stop()
		}
		if redisSrv != nil {
			redisSrv.Close()
		}
		if pgSrv != nil {
			pgSrv.Close()
		}
		if mariaSrv != nil {
			mariaSrv.Close()
		}
		if natsSrv != nil {
			natsSrv.Close()
		}
		if sqliteDir != "" {
			os.RemoveAll(sqliteDir)
		}
		etcdSrv, dynSrv, cfSrv, redisSrv, pgSrv, mariaSrv, natsSrv, sqliteDir = nil, nil, nil, nil, nil, nil, nil, ""
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: the round-trip tests and real-backend benchmarks need the real servers: %v\n", err)
		stopAll()
		return 1
	}
	stop := stopAll
	defer stop()
	code := m.Run()
	stop()
	if code == 0 {
		// Idle keep-alive connections (the SDK clients keep their own
		// transports) are the only goroutines allowed to outlive the
		// tests.
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		if err := goleak.Find(
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "bench: goroutines leaked:", err)
			return 1
		}
	}
	return code
}

// quiet discards the Breakers' warnings (Workers KV is last-writer-wins,
// which these tests know).
var quiet = slog.New(slog.DiscardHandler)

// backends are the stores the round-trip tests cover, memory first.
var backends = []string{"memory", "etcd", "dynamodb", "cloudflarekv", "redis", "postgres", "mysql", "nats", "sqlite"}

// realBackends are those outside the process's memory: behind a network
// round trip, or (SQLite) a file that other processes share.
var realBackends = backends[1:]

// counts is a snapshot of a counter: reads, writes and anything else.
type counts struct{ Reads, Writes, Other int64 }

func (c counts) sub(d counts) counts {
	return counts{c.Reads - d.Reads, c.Writes - d.Writes, c.Other - d.Other}
}

// tally counts requests by kind; safe for concurrent use.
type tally struct{ reads, writes, other atomic.Int64 }

func (t *tally) load() counts {
	if t == nil {
		return counts{}
	}
	return counts{t.reads.Load(), t.writes.Load(), t.other.Load()}
}

// countingStore counts a Store's calls: Get as a read, CompareAndSwap and
// CompareAndDelete as writes, and the writes that lost (conflicts).
type countingStore struct {
	driver.Store
	calls     tally
	conflicts atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	s.calls.reads.Add(1)
	return s.Store.Get(ctx, key)
}

func (s *countingStore) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	s.calls.writes.Add(1)
	v, err := s.Store.CompareAndSwap(ctx, key, old, value, ttl)
	if errorsIsConflict(err) {
		s.conflicts.Add(1)
	}
	return v, err
}

func (s *countingStore) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	s.calls.writes.Add(1)
	err := s.Store.CompareAndDelete(ctx, key, old)
	if errorsIsConflict(err) {
		s.conflicts.Add(1)
	}
	return err
}

func errorsIsConflict(err error) bool { return errors.Is(err, driver.ErrConflict) }

// countingInterceptor counts etcd's unary gRPC calls: Range as a read;
// Txn, Put and DeleteRange as writes; anything else (LeaseGrant, ...) as
// other.
func countingInterceptor(t *tally) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		switch method {
		case "/etcdserverpb.KV/Range":
			t.reads.Add(1)
		case "/etcdserverpb.KV/Txn", "/etcdserverpb.KV/Put", "/etcdserverpb.KV/DeleteRange":
			t.writes.Add(1)
		default:
			t.other.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// countingTransport counts HTTP requests. DynamoDB's are classified by
// their X-Amz-Target operation (GetItem a read; PutItem, DeleteItem,
// UpdateItem writes), Workers KV's by method (GET a read; PUT, DELETE
// writes).
type countingTransport struct {
	t    *tally
	next http.RoundTripper
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	op := r.Header.Get("X-Amz-Target")
	switch {
	case op == "DynamoDB_20120810.GetItem", op == "" && r.Method == http.MethodGet:
		c.t.reads.Add(1)
	case op == "DynamoDB_20120810.PutItem", op == "DynamoDB_20120810.DeleteItem", op == "DynamoDB_20120810.UpdateItem",
		op == "" && (r.Method == http.MethodPut || r.Method == http.MethodDelete):
		c.t.writes.Add(1)
	default:
		c.t.other.Add(1)
	}
	return c.next.RoundTrip(r)
}

// fixedClock is the memory backend's clock: time stands still.
type fixedClock struct{ ns atomic.Int64 }

func (c *fixedClock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// rig is one backend's shared keyspace (a fresh prefix), on which a test
// opens endpoints: each is a separate store instance (another worker
// process), with its own counters.
type rig struct {
	name   string
	prefix string
	// clock is the stores' clock (memory, Workers KV) or time.Now; the
	// Breakers run on it plus skip (see advance).
	clock func() time.Time
	skip  atomic.Int64
	mem   *memory.Store // memory: the one store every endpoint shares
	tb    testing.TB
	// opened are the endpoints open returned.
	opened []*endpoint
	// cfCache configures the Workers KV adapter's own read cache:
	// cloudflarekv.WithCache(size, freshness); nil keeps its default.
	cfCache []int
}

var prefixSeq atomic.Int64

func newRig(tb testing.TB, name string) *rig {
	r := &rig{name: name, tb: tb, clock: time.Now,
		prefix: "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatInt(prefixSeq.Add(1), 10) + "/"}
	switch name {
	case "memory":
		c := &fixedClock{}
		c.ns.Store(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC).UnixNano())
		r.clock = c.Now
		r.mem = memory.New(memory.WithClock(c.Now))
	case "cloudflarekv":
		// Miniflare's KV clock stands still unless advanced; records
		// are judged and written by it.
		r.clock = cfSrv.Now
	}
	return r
}

// endpoint is one worker's store over a rig's keyspace.
type endpoint struct {
	*countingStore
	wire *tally // requests on the wire; nil for memory and SQLite (no network)
	etcd *etcd.Store
	// nats is the NATS endpoint's connection, whose own statistics the
	// round-trip test compares with the wire count.
	nats      *natsgo.Conn
	natsStore *kvnats.Store
	// raw is the store under the counting wrapper, which a mirror can
	// follow (countingStore is no driver.Follower).
	raw driver.Store
}

// open returns a new store over the rig's keyspace.
func (r *rig) open() *endpoint {
	tb := r.tb
	tb.Helper()
	e := &endpoint{}
	var s driver.Store
	switch r.name {
	case "memory":
		s = r.mem
	case "etcd":
		e.wire = &tally{}
		cli, err := clientv3.New(clientv3.Config{
			Endpoints: etcdSrv.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
			DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(countingInterceptor(e.wire))},
		})
		if err != nil {
			tb.Fatalf("etcd client: %v", err)
		}
		tb.Cleanup(func() { cli.Close() })
		st, err := etcd.New(cli)
		if err != nil {
			tb.Fatalf("etcd.New: %v", err)
		}
		tb.Cleanup(func() { st.Close() })
		ps, err := kvbreaker.Prefixed(st, r.prefix)
		if err != nil {
			tb.Fatalf("kvbreaker.Prefixed: %v", err)
		}
		s, e.etcd = ps, st
	case "dynamodb":
		e.wire = &tally{}
		hc := &http.Client{Transport: countingTransport{t: e.wire, next: http.DefaultTransport}}
		cli := newClient(dynSrv.Endpoint, func(o *dynamodb.Options) { o.HTTPClient = hc })
		st, err := dynstore.New(cli, dynTable)
		if err != nil {
			tb.Fatalf("dynamodb.New: %v", err)
		}
		if s, err = kvbreaker.Prefixed(st, r.prefix); err != nil {
			tb.Fatalf("kvbreaker.Prefixed: %v", err)
		}
	case "cloudflarekv":
		e.wire = &tally{}
		hc := &http.Client{Transport: countingTransport{t: e.wire, next: http.DefaultTransport}}
		cli := kvsdk.NewKVService(append([]option.RequestOption{option.WithBaseURL(cfSrv.BaseURL()), option.WithAPIToken(cfSrv.Token)}, option.WithHTTPClient(hc))...)
		opts := []cloudflarekv.Option{cloudflarekv.WithClock(cfSrv.Now), cloudflarekv.WithLogger(quiet)}
		if r.cfCache != nil {
			opts = append(opts, cloudflarekv.WithCache(r.cfCache[0], time.Duration(r.cfCache[1])*time.Second))
		}
		st, err := cloudflarekv.New(cli, cfSrv.AccountID, cfSrv.NamespaceID, opts...)
		if err != nil {
			tb.Fatalf("cloudflarekv.New: %v", err)
		}
		tb.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := st.Flush(ctx); err != nil {
				tb.Errorf("cloudflarekv Flush: %v", err)
			}
		})
		if s, err = kvbreaker.Prefixed(st, r.prefix); err != nil {
			tb.Fatalf("kvbreaker.Prefixed: %v", err)
		}
	case "redis":
		e.wire = &tally{}
		cli := goredis.NewClient(&goredis.Options{Addr: redisSrv.Addr(), ContextTimeoutEnabled: true})
		cli.AddHook(redisCounter{e.wire})
		tb.Cleanup(func() { cli.Close() })
		st, err := redis.New(cli)
		if err != nil {
			tb.Fatalf("redis.New: %v", err)
		}
		if s, err = kvbreaker.Prefixed(st, r.prefix); err != nil {
			tb.Fatalf("kvbreaker.Prefixed: %v", err)
		}
	case "postgres":
		e.wire = &tally{}
		cfg, err := pgxpool.ParseConfig(pgSrv.URL())
		if err != nil {
			tb.Fatal(err)
		}
		cfg.ConnConfig.Tracer = pgCounter{e.wire}
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			tb.Fatalf("pgxpool: %v", err)
		}
		st, err := postgres.New(pool, pgTable)
		if err != nil {
			tb.Fatalf("postgres.New: %v", err)
		}
		tb.Cleanup(func() { st.Close(); pool.Close() })
		if s, err = kvbreaker.Prefixed(st, r.prefix); err != nil {
			tb.Fatalf("kvbreaker.Prefixed: %v", err)
		}
	case "mysql":
		e.wire = &tally{}
		cfg, err := gomysql.ParseDSN(mariaSrv.DSN())
		if err != nil {
			tb.Fatal(err)
		}
		conn, err := gomysql.NewConnector(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		db := sql.OpenDB(mysqlCounter{conn, e.wire})
		st, err := mysql.New(db, mysqlTable, mysql.WithEndpoint(mariaSrv.Addr()))
		if err != nil {
			tb.Fatalf("mysql.New: %v", err)
		}
		tb.Cleanup(func() { st.Close(); db.Close() })
		if s, err = kvbreaker.Prefixed(st, r.prefix); err != nil {
			tb.Fatalf("kvbreaker.Prefixed: %v", err)
		}
	case "nats":
		// One connection per endpoint, as each worker process has; its
		// dialer counts the publishes (natsDialer).
		e.wire = &tally{}
		nc, err := natsgo.Connect(natsSrv.URL(), natsgo.SetCustomDialer(natsDialer{e.wire}), natsQuiet)
		if err != nil {
			tb.Fatalf("nats connect: %v", err)
		}
		st, err := kvnats.New(context.Background(), nc, natsBucket)
		if err != nil {
			nc.Close()
			tb.Fatalf("nats.New: %v", err)
		}
		tb.Cleanup(func() { st.Close(); nc.Close() })
		if s, err = kvbreaker.Prefixed(st, r.prefix); err != nil {
			tb.Fatalf("kvbreaker.Prefixed: %v", err)
		}
		e.nats, e.natsStore = nc, st
	case "sqlite":
		// One file for the whole run, as one host's fleet shares one;
		// each endpoint opens it again (its own connections, as another
		// process has).
		st, err := sqlite.Open(context.Background(), filepath.Join(sqliteDir, "kvbreaker.db"))
		if err != nil {
			tb.Fatalf("sqlite.Open: %v", err)
		}
		tb.Cleanup(func() { st.Close() })
		if s, err = kvbreaker.Prefixed(st, r.prefix); err != nil {
			tb.Fatalf("kvbreaker.Prefixed: %v", err)
		}
	default:
		tb.Fatalf("unknown backend %q", r.name)
	}
	e.countingStore, e.raw = &countingStore{Store: s}, s
	r.opened = append(r.opened, e)
	return e
}

// now is the Breakers' clock: the rig's clock plus what advance skipped.
func (r *rig) now() time.Time { return r.clock().Add(time.Duration(r.skip.Load())) }

// advance moves the Breakers' clocks forward by d but not the stores',
// which judge expiry: records stay live, so a test reaches the end of a
// restraint without waiting (etcd's leases run on the server's real clock).
func (r *rig) advance(d time.Duration) { r.skip.Add(int64(d)) }

// breaker returns a Breaker over a new endpoint, on the rig's clock.
func (r *rig) breaker(s kvbreaker.Settings) (*kvbreaker.Breaker, *endpoint) {
	r.tb.Helper()
	e := r.open()
	s.Clock, s.Logger = r.now, quiet
	b, err := kvbreaker.New(e, s)
	if err != nil {
		r.tb.Fatalf("kvbreaker.New: %v", err)
	}
	return b, e
}

// wireTotal sums the requests on the wire of every endpoint opened so far.
func (r *rig) wireTotal() counts {
	var c counts
	for _, e := range r.opened {
		w := e.wire.load()
		c.Reads, c.Writes, c.Other = c.Reads+w.Reads, c.Writes+w.Writes, c.Other+w.Other
	}
	return c
}

// snapshot is an endpoint's store calls and wire requests so far.
type snapshot struct{ calls, wire counts }

func (e *endpoint) snapshot() snapshot { return snapshot{e.calls.load(), e.wire.load()} }

func errorsIsNotFound(err error) bool { return errors.Is(err, driver.ErrNotFound) }

// newClient returns a DynamoDB client for a local endpoint (dynalite, or
// DynamoDB Local) with static fake credentials and region us-east-1.
func newClient(endpoint string, opts ...func(*dynamodb.Options)) *dynamodb.Client {
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDFAKEFORTESTS", "fake-secret-for-tests", "")}
	return dynamodb.NewFromConfig(cfg, append([]func(*dynamodb.Options){func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) }}, opts...)...)
}

// createPGTable creates the bench's PostgreSQL table with a pool of its own.
func createPGTable(ctx context.Context) error {
	pool, err := pgxpool.New(ctx, pgSrv.URL())
	if err != nil {
		return err
	}
	defer pool.Close()
	return postgres.CreateTable(ctx, pool, pgTable)
}

// redisCounter counts go-redis commands: HMGET (Get) a read; EVALSHA and
// EVAL (the compare-and-swap and compare-and-delete scripts) writes;
// anything else (HELLO, PING, SCAN) as other. An EVALSHA answered NOSCRIPT
// is not counted: it happens once per script and server (go-redis then
// sends the script with EVAL, counted as the write, and the server keeps
// it), not per operation.
type redisCounter struct{ t *tally }

func (redisCounter) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (c redisCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		switch name := strings.ToLower(cmd.Name()); {
		case name == "hmget":
			c.t.reads.Add(1)
		case name == "evalsha" && err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT"):
		case name == "evalsha", name == "eval":
			c.t.writes.Add(1)
		default:
			c.t.other.Add(1)
		}
		return err
	}
}

func (redisCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// pgCounter counts PostgreSQL statements: SELECT a read; INSERT, UPDATE,
// DELETE and WITH (a statement that writes) writes; anything else other.
type pgCounter struct{ t *tally }

func (c pgCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	sql := strings.ToUpper(strings.TrimSpace(d.SQL))
	switch {
	case strings.HasPrefix(sql, "SELECT"):
		c.t.reads.Add(1)
	case strings.HasPrefix(sql, "INSERT"), strings.HasPrefix(sql, "UPDATE"), strings.HasPrefix(sql, "DELETE"), strings.HasPrefix(sql, "WITH"):
		c.t.writes.Add(1)
	default:
		c.t.other.Add(1)
	}
	return ctx
}

func (pgCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// createMySQLTable creates the bench's MariaDB table with a pool of its own.
func createMySQLTable(ctx context.Context) error {
	db, err := sql.Open("mysql", mariaSrv.DSN())
	if err != nil {
		return err
	}
	defer db.Close()
	return mysql.CreateTable(ctx, db, mysqlTable)
}

// mysqlCounter counts the statements go-sql-driver sends: SELECT a read;
// INSERT, UPDATE and DELETE writes; anything else (BEGIN, COMMIT) other.
// The store's statements are prepared, so each execution is one command
// and its answer: one round trip. The prepare itself, once per statement
// and connection, is not counted (as a NOSCRIPT is not on Redis).
type mysqlCounter struct {
	sqldriver.Connector
	t *tally
}

func (c mysqlCounter) Connect(ctx context.Context) (sqldriver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &mysqlConn{conn.(mysqlDriverConn), c.t}, nil
}

// mysqlDriverConn is what go-sql-driver's connection implements and
// database/sql looks for; the wrapper passes each on.
type mysqlDriverConn interface {
	sqldriver.Conn
	sqldriver.ConnBeginTx
	sqldriver.ConnPrepareContext
	sqldriver.QueryerContext
	sqldriver.ExecerContext
	sqldriver.Pinger
	sqldriver.NamedValueChecker
	sqldriver.SessionResetter
	sqldriver.Validator
}

type mysqlConn struct {
	mysqlDriverConn
	t *tally
}

func (c *mysqlConn) count(query string) {
	switch q := strings.ToUpper(strings.TrimSpace(query)); {
	case strings.HasPrefix(q, "SELECT"):
		c.t.reads.Add(1)
	case strings.HasPrefix(q, "INSERT"), strings.HasPrefix(q, "UPDATE"), strings.HasPrefix(q, "DELETE"):
		c.t.writes.Add(1)
	default:
		c.t.other.Add(1)
	}
}

func (c *mysqlConn) BeginTx(ctx context.Context, opts sqldriver.TxOptions) (sqldriver.Tx, error) {
	c.t.other.Add(1)
	return c.mysqlDriverConn.BeginTx(ctx, opts)
}

func (c *mysqlConn) QueryContext(ctx context.Context, query string, args []sqldriver.NamedValue) (sqldriver.Rows, error) {
	c.count(query)
	return c.mysqlDriverConn.QueryContext(ctx, query, args)
}

func (c *mysqlConn) ExecContext(ctx context.Context, query string, args []sqldriver.NamedValue) (sqldriver.Result, error) {
	c.count(query)
	return c.mysqlDriverConn.ExecContext(ctx, query, args)
}

func (c *mysqlConn) Prepare(query string) (sqldriver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *mysqlConn) PrepareContext(ctx context.Context, query string) (sqldriver.Stmt, error) {
	st, err := c.mysqlDriverConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return &mysqlStmt{st.(mysqlDriverStmt), c, query}, nil
}

// mysqlDriverStmt is what go-sql-driver's prepared statement implements.
type mysqlDriverStmt interface {
	sqldriver.Stmt
	sqldriver.StmtExecContext
	sqldriver.StmtQueryContext
	sqldriver.NamedValueChecker
}

type mysqlStmt struct {
	mysqlDriverStmt
	c     *mysqlConn
	query string
}

func (s *mysqlStmt) ExecContext(ctx context.Context, args []sqldriver.NamedValue) (sqldriver.Result, error) {
	s.c.count(s.query)
	return s.mysqlDriverStmt.ExecContext(ctx, args)
}

func (s *mysqlStmt) QueryContext(ctx context.Context, args []sqldriver.NamedValue) (sqldriver.Rows, error) {
	s.c.count(s.query)
	return s.mysqlDriverStmt.QueryContext(ctx, args)
}

// createNATSBucket creates the bench's JetStream KV bucket (as kvnats.New
// would on first use) over a connection of its own, so that the endpoints'
// counted connections only open it.
func createNATSBucket(ctx context.Context) error {
	nc, err := natsgo.Connect(natsSrv.URL(), natsQuiet)
	if err != nil {
		return err
	}
	defer nc.Close()
	st, err := kvnats.New(ctx, nc, natsBucket)
	if err != nil {
		return err
	}
	return st.Close()
}

// natsQuiet drops nats.go's printed asynchronous errors.
var natsQuiet = natsgo.ErrorHandler(func(*natsgo.Conn, *natsgo.Subscription, error) {})
