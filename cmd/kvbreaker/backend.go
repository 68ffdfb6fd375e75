//go:build !simulateonly

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/cloudflare/cloudflare-go/v6/kv"
	"github.com/cloudflare/cloudflare-go/v6/option"
	"github.com/spf13/pflag"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/cloudflarekv"
	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/tlsdiag"
)

// TokenEnv is the environment variable the cloudflarekv backend reads its
// API token from (Cloudflare's own name). There is deliberately no flag: a
// flag's value shows in ps and shell history.
const TokenEnv = "CLOUDFLARE_API_TOKEN"

// backendFlags are the connection flags check, list, inspect and reset
// share. Each can also come from an environment variable (envVars); a flag
// given on the command line wins.
type backendFlags struct {
	backend string
	prefix  string

	etcdEndpoints                 string
	etcdCACert, etcdCert, etcdKey string

	dynamoTable, dynamoEndpoint string

	cfAccount, cfNamespace, cfBaseURL string

	redisURL                         string
	redisCluster                     string // "true" or "": see boolString
	redisCACert, redisCert, redisKey string

	pgURL, pgTable string

	mysqlDSN, mysqlTable string
	sqlitePath           string
	natsURL, natsBucket  string

	// clockSkew is the fleet's clock-skew bound, passed to stores that pad
	// by it (cloudflarekv) and to the Breakers the commands make.
	clockSkew time.Duration

	fs *pflag.FlagSet
	// fromEnv names the flags whose value came from the environment.
	fromEnv map[string]string
	// bound says what bounds connecting, for messages ("--timeout 3s").
	bound string
}

// envVars maps each connection flag to its environment variable.
var envVars = []struct{ flag, env string }{
	{"backend", "KVBREAKER_BACKEND"},
	{"prefix", "KVBREAKER_PREFIX"},
	{"etcd-endpoints", "KVBREAKER_ETCD_ENDPOINTS"},
	{"etcd-cacert", "KVBREAKER_ETCD_CACERT"},
	{"etcd-cert", "KVBREAKER_ETCD_CERT"},
	{"etcd-key", "KVBREAKER_ETCD_KEY"},
	{"dynamodb-table", "KVBREAKER_DYNAMODB_TABLE"},
	{"dynamodb-endpoint", "KVBREAKER_DYNAMODB_ENDPOINT"},
	{"cf-account", "KVBREAKER_CLOUDFLARE_ACCOUNT_ID"},
	{"cf-namespace", "KVBREAKER_CLOUDFLARE_NAMESPACE_ID"},
	{"cf-base-url", "KVBREAKER_CLOUDFLARE_BASE_URL"},
	{"redis-url", "KVBREAKER_REDIS_URL"},
	{"redis-cluster", "KVBREAKER_REDIS_CLUSTER"},
	{"redis-cacert", "KVBREAKER_REDIS_CACERT"},
	{"redis-cert", "KVBREAKER_REDIS_CERT"},
	{"redis-key", "KVBREAKER_REDIS_KEY"},
	{"postgres-url", "KVBREAKER_POSTGRES_URL"},
	{"postgres-table", "KVBREAKER_POSTGRES_TABLE"},
	{"mysql-dsn", "KVBREAKER_MYSQL_DSN"},
	{"mysql-table", "KVBREAKER_MYSQL_TABLE"},
	{"sqlite-path", "KVBREAKER_SQLITE_PATH"},
	{"nats-url", "KVBREAKER_NATS_URL"},
	{"nats-bucket", "KVBREAKER_NATS_BUCKET"},
	{"clock-skew", "KVBREAKER_CLOCK_SKEW"},
}

func envOf(flag string) string {
	for _, e := range envVars {
		if e.flag == flag {
			return e.env
		}
	}
	return ""
}

// register adds the connection flags to fs.
func (f *backendFlags) register(fs *pflag.FlagSet) {
	f.fs = fs
	env := func(flag, usage string) string { return usage + " [$" + envOf(flag) + "]" }
	fs.StringVar(&f.backend, "backend", "", env("backend", "the store: "+strings.Join(backendNames(), ", ")+" (required)"))
	fs.StringVar(&f.prefix, "prefix", "", env("prefix", "key prefix your fleet's Breakers use (kvbreaker.Prefixed); default none"))
	fs.StringVar(&f.etcdEndpoints, "etcd-endpoints", "", env("etcd-endpoints", "etcd: comma-separated client URLs, e.g. https://etcd-1:2379,https://etcd-2:2379"))
	fs.StringVar(&f.etcdCACert, "etcd-cacert", "", env("etcd-cacert", "etcd: PEM `file` of the CA that signed the servers' certificates (turns TLS on)"))
	fs.StringVar(&f.etcdCert, "etcd-cert", "", env("etcd-cert", "etcd: PEM client certificate `file`, for mutual TLS (with --etcd-key)"))
	fs.StringVar(&f.etcdKey, "etcd-key", "", env("etcd-key", "etcd: PEM client key `file`, for mutual TLS (with --etcd-cert)"))
	fs.StringVar(&f.dynamoTable, "dynamodb-table", "", env("dynamodb-table", "dynamodb: the table (partition key \"pk\", a String)"))
	fs.StringVar(&f.dynamoEndpoint, "dynamodb-endpoint", "", env("dynamodb-endpoint", "dynamodb: endpoint `URL` override, for DynamoDB Local or dynalite"))
	fs.StringVar(&f.cfAccount, "cf-account", "", env("cf-account", "cloudflarekv: the account ID"))
	fs.StringVar(&f.cfNamespace, "cf-namespace", "", env("cf-namespace", "cloudflarekv: the Workers KV namespace ID"))
	fs.StringVar(&f.cfBaseURL, "cf-base-url", "", env("cf-base-url", "cloudflarekv: API base `URL` override, e.g. a local Miniflare's http://127.0.0.1:8787/client/v4/"))
	fs.StringVar(&f.pgURL, "postgres-url", "", env("postgres-url", "postgres: connection `URL`, e.g. postgres://user@db:5432/app, or keyword/value settings, e.g. 'host=db user=app dbname=app' (a password belongs in $PGPASSWORD or ~/.pgpass; output never shows one)"))
	fs.StringVar(&f.pgTable, "postgres-table", defaultPostgresTable, env("postgres-table", "postgres: the table (postgres.CreateTable)"))
	fs.StringVar(&f.mysqlDSN, "mysql-dsn", "", env("mysql-dsn", "mysql: go-sql-driver/mysql data source name, user[:password]@tcp(host:port)/database[?options], for MySQL or MariaDB (output never shows it)"))
	fs.StringVar(&f.mysqlTable, "mysql-table", defaultMySQLTable, env("mysql-table", "mysql: the table (mysql.CreateTable)"))
	fs.StringVar(&f.sqlitePath, "sqlite-path", "", env("sqlite-path", "sqlite: the database `file` the fleet's processes share (made by \"kvbreaker init\" or the first sqlite.Open)"))
	fs.StringVar(&f.natsURL, "nats-url", "", env("nats-url", "nats: comma-separated server `URL`s, e.g. nats://nats-1:4222,nats://nats-2:4222 (user information in a URL authenticates and is never shown)"))
	fs.StringVar(&f.natsBucket, "nats-bucket", defaultNATSBucket, env("nats-bucket", "nats: the JetStream key-value bucket (created if missing)"))
	fs.StringVar(&f.redisURL, "redis-url", "", env("redis-url", "redis: server `URL`, redis://[:password@]host:port/db (rediss:// for TLS); with --redis-cluster, redis://[:password@]host:port?addr=host2:port&addr=host3:port"))
	fs.Var(boolString{&f.redisCluster}, "redis-cluster", env("redis-cluster", "redis: --redis-url names the seed nodes of a Redis Cluster (go-redis ParseClusterURL); list visits every master"))
	fs.Lookup("redis-cluster").NoOptDefVal = "true"
	fs.StringVar(&f.redisCACert, "redis-cacert", "", env("redis-cacert", "redis: PEM `file` of the CA that signed the server's certificate, for a rediss:// URL (default: the system's)"))
	fs.StringVar(&f.redisCert, "redis-cert", "", env("redis-cert", "redis: PEM client certificate `file`, for a server with tls-auth-clients (with --redis-key)"))
	fs.StringVar(&f.redisKey, "redis-key", "", env("redis-key", "redis: PEM client key `file` (with --redis-cert)"))
	fs.DurationVar(&f.clockSkew, "clock-skew", kvbreaker.DefaultClockSkew, env("clock-skew", "the fleet's clock-skew bound (Settings.ClockSkew)"))
}

// applyEnv sets every connection flag not given on the command line from
// its environment variable, if set.
func (f *backendFlags) applyEnv() error {
	f.fromEnv = map[string]string{}
	for _, e := range envVars {
		v, ok := os.LookupEnv(e.env)
		if !ok || v == "" || f.fs.Changed(e.flag) {
			continue
		}
		if err := f.fs.Set(e.flag, v); err != nil {
			return usagef("%s: %v", e.env, err)
		}
		f.fromEnv[e.flag] = e.env
	}
	return nil
}

// name is how a message names a flag: "--x", or "--x (from $X)".
func (f *backendFlags) name(flag string) string {
	if env, ok := f.fromEnv[flag]; ok {
		return "--" + flag + " (from $" + env + ")"
	}
	return "--" + flag
}

// envHelp is the part of a command's --help that lists the environment.
const envHelp = `Environment (a flag given on the command line wins):
  KVBREAKER_BACKEND, KVBREAKER_PREFIX, KVBREAKER_CLOCK_SKEW
  KVBREAKER_ETCD_ENDPOINTS, KVBREAKER_ETCD_CACERT, KVBREAKER_ETCD_CERT, KVBREAKER_ETCD_KEY
  KVBREAKER_DYNAMODB_TABLE, KVBREAKER_DYNAMODB_ENDPOINT
  KVBREAKER_CLOUDFLARE_ACCOUNT_ID, KVBREAKER_CLOUDFLARE_NAMESPACE_ID, KVBREAKER_CLOUDFLARE_BASE_URL
  KVBREAKER_REDIS_URL, KVBREAKER_REDIS_CLUSTER
  KVBREAKER_REDIS_CACERT, KVBREAKER_REDIS_CERT, KVBREAKER_REDIS_KEY
  KVBREAKER_POSTGRES_URL, KVBREAKER_POSTGRES_TABLE
  KVBREAKER_MYSQL_DSN, KVBREAKER_MYSQL_TABLE
  KVBREAKER_SQLITE_PATH
  KVBREAKER_NATS_URL, KVBREAKER_NATS_BUCKET
  PGSSLMODE, PGSSLROOTCERT, PGSSLCERT, PGSSLKEY, PGPASSWORD, ...
                 libpq's variables, as psql reads them (sslmode=, sslrootcert=, … in
                 --postgres-url win)
  AWS_REGION, AWS_PROFILE, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, ...
                 DynamoDB's region and credentials: the AWS SDK's default chain
                 (environment, shared config and credentials files, SSO, instance role)
  CLOUDFLARE_API_TOKEN
                 the Workers KV API token (Workers KV Storage: Edit); never a flag
`

// backendFlagsHelp is the part of a command's --help that shows each
// backend's flags by example.
const backendFlagsHelp = `Backends (--backend): etcd, dynamodb (Amazon DynamoDB), cloudflarekv
(Cloudflare Workers KV), redis (Redis, or a Redis Cluster), postgres
(PostgreSQL), mysql (MySQL or MariaDB), sqlite (one SQLite file on this host), nats (NATS
JetStream key-value) and memory. Their connection flags (the same for check, list, inspect,
reset and init):
  etcd          --etcd-endpoints https://etcd-1:2379,https://etcd-2:2379
                [--etcd-cacert ca.pem [--etcd-cert client.pem --etcd-key client-key.pem]]
  dynamodb      --dynamodb-table kvbreaker [--dynamodb-endpoint http://localhost:8000]
  cloudflarekv  --cf-account ACCOUNT_ID --cf-namespace NAMESPACE_ID
                [--cf-base-url http://127.0.0.1:8787/client/v4/]
  postgres      --postgres-url postgres://user@db:5432/app [--postgres-table kvbreaker]
                or --postgres-url 'host=db user=app dbname=app'
                (password: $PGPASSWORD or ~/.pgpass, best not in the URL;
                TLS: ?sslmode=verify-full&sslrootcert=ca.pem, or $PGSSLROOTCERT)
  mysql         --mysql-dsn 'app:secret@tcp(db:3306)/app' [--mysql-table kvbreaker]
                (best from $KVBREAKER_MYSQL_DSN: a flag shows in ps)
  redis         --redis-url redis://127.0.0.1:6379/0
                or --redis-url rediss://user:password@redis:6380/0 --redis-cacert ca.pem
                [--redis-cert client.pem --redis-key client-key.pem]
                or --redis-cluster --redis-url redis://10.0.0.1:6379?addr=10.0.0.2:6379
  sqlite        --sqlite-path /var/lib/app/kvbreaker.db
  nats          --nats-url nats://nats-1:4222,nats://nats-2:4222 [--nats-bucket kvbreaker]
  memory        no flags: a store inside this process, empty at start (a demo)
PostgreSQL, MySQL and DynamoDB need a table: "kvbreaker init" with the same flags
creates it ("kvbreaker init --print" shows the SQL or AWS CLI commands).
--prefix must be the key prefix your fleet's Breakers use (kvbreaker.Prefixed).
No output or error shows a credential: URLs are shown without user
information or password=/token= values, keyword/value strings without
password=, --mysql-dsn not at all, and $PGPASSWORD, $CLOUDFLARE_API_TOKEN and AWS keys never.
An unreachable endpoint is reported within about 2 s; one that accepts but
never answers, within --timeout.

` + envHelp

// A conn is an open connection to one deployment's store.
type conn struct {
	// describe names the deployment without credentials, for output.
	describe string
	// store is the backend's store, without prefix: the commands wrap it
	// with kvbreaker.Prefixed.
	store driver.Store
	// purge, when set, removes whatever the backend keeps at fullKey (as
	// it stores it) and returns how many entries it removed: the
	// tombstone a delete leaves (DynamoDB, Redis, PostgreSQL) or an entry
	// that expired logically (DynamoDB keeps it until its TTL sweep, days
	// later; PostgreSQL until a purge).
	purge func(ctx context.Context, fullKey string) (int, error)
	// advance, when set, moves the backend's clock (test servers only).
	advance func(ctx context.Context, d time.Duration) error
	// clockShift moves this machine's clock as check's clock measurement
	// reads it (tests only: an offset of a known size without changing a
	// server's clock).
	clockShift time.Duration
}

// closeTimeout bounds sending queued writes when a command ends.
const closeTimeout = 30 * time.Second

// close sends what the store has queued (a failure a Breaker recorded, a
// reset) and releases its connections.
func (c *conn) close() {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if f, ok := c.store.(driver.Flusher); ok {
		_ = f.Flush(ctx)
	}
	if cl, ok := c.store.(io.Closer); ok {
		_ = cl.Close()
	}
}

// prefixed is the store under prefix.
func (c *conn) prefixed(prefix string) (driver.Store, error) {
	return kvbreaker.Prefixed(c.store, prefix)
}

// A backendDef opens a backend from the connection flags.
type backendDef struct {
	open func(ctx context.Context, f *backendFlags) (*conn, error)
	// flags names the backend whose connection flags it takes (itself
	// for the built-in ones; tests register variants).
	flags string
}

// backends is the table of backends by --backend name. Tests add their own.
var backends = map[string]backendDef{
	"etcd":         {openEtcd, "etcd"},
	"dynamodb":     {openDynamoDB, "dynamodb"},
	"cloudflarekv": {func(ctx context.Context, f *backendFlags) (*conn, error) { return openCloudflareKV(ctx, f, nil, nil) }, "cloudflarekv"},
	"memory":       {openMemory, "memory"},
	"redis":        {openRedis, "redis"},
	"postgres":     {openPostgres, "postgres"},
	"mysql":        {openMySQL, "mysql"},
	"sqlite":       {openSQLite, "sqlite"},
	"nats":         {openNATS, "nats"},
}

// publicBackends are the names help and completion offer (not the tests').
var publicBackends = []string{"cloudflarekv", "dynamodb", "etcd", "memory", "mysql", "nats", "postgres", "redis", "sqlite"}

func backendNames() []string { return publicBackends }

// validate checks the flags for the chosen backend without touching the
// network: a missing or misplaced flag is a usage error. A value from the
// environment for another backend is ignored, not an error: one shell may
// export several backends' settings.
func (f *backendFlags) validate() error {
	if f.backend == "" {
		return usagef("--backend is required (or $KVBREAKER_BACKEND): one of %s", strings.Join(backendNames(), ", "))
	}
	def, ok := backends[f.backend]
	if !ok {
		return usagef("%s is %q: want one of %s", f.name("backend"), f.backend, strings.Join(backendNames(), ", "))
	}
	if f.clockSkew < 0 {
		return usagef("%s is %v: want zero or more", f.name("clock-skew"), f.clockSkew)
	}
	all := []struct {
		name    string
		value   *string
		backend string
	}{
		{"etcd-endpoints", &f.etcdEndpoints, "etcd"}, {"etcd-cacert", &f.etcdCACert, "etcd"},
		{"etcd-cert", &f.etcdCert, "etcd"}, {"etcd-key", &f.etcdKey, "etcd"},
		{"dynamodb-table", &f.dynamoTable, "dynamodb"}, {"dynamodb-endpoint", &f.dynamoEndpoint, "dynamodb"},
		{"cf-account", &f.cfAccount, "cloudflarekv"}, {"cf-namespace", &f.cfNamespace, "cloudflarekv"},
		{"cf-base-url", &f.cfBaseURL, "cloudflarekv"},
		{"redis-url", &f.redisURL, "redis"}, {"redis-cluster", &f.redisCluster, "redis"},
		{"redis-cacert", &f.redisCACert, "redis"}, {"redis-cert", &f.redisCert, "redis"}, {"redis-key", &f.redisKey, "redis"},
		{"postgres-url", &f.pgURL, "postgres"},
		{"mysql-dsn", &f.mysqlDSN, "mysql"},
		{"sqlite-path", &f.sqlitePath, "sqlite"},
		{"nats-url", &f.natsURL, "nats"},
	}
	for _, x := range all {
		if *x.value == "" || x.backend == def.flags {
			continue
		}
		if _, env := f.fromEnv[x.name]; env {
			*x.value = ""
			continue
		}
		return usagef("--%s is a %s flag, but --backend is %s", x.name, x.backend, f.backend)
	}
	need := func(name, value string) error {
		if value == "" {
			return usagef("--backend %s needs --%s (or $%s)", f.backend, name, envOf(name))
		}
		return nil
	}
	switch def.flags {
	case "etcd":
		if err := need("etcd-endpoints", f.etcdEndpoints); err != nil {
			return err
		}
		if len(f.endpoints()) == 0 {
			return usagef("%s has no endpoint", f.name("etcd-endpoints"))
		}
		for _, ep := range f.endpoints() {
			if err := f.checkURL("etcd-endpoints", ep); err != nil {
				return err
			}
		}
		if (f.etcdCert == "") != (f.etcdKey == "") {
			return usagef("--etcd-cert and --etcd-key go together (mutual TLS): give both or neither")
		}
	case "dynamodb":
		if err := need("dynamodb-table", f.dynamoTable); err != nil {
			return err
		}
		if f.dynamoEndpoint != "" {
			if err := f.checkURL("dynamodb-endpoint", f.dynamoEndpoint); err != nil {
				return err
			}
		}
	case "postgres":
		if err := need("postgres-url", f.pgURL); err != nil {
			return err
		}
		if err := f.checkPostgresURL(); err != nil {
			return err
		}
	case "mysql":
		if err := need("mysql-dsn", f.mysqlDSN); err != nil {
			return err
		}
		if err := f.checkMySQLDSN(); err != nil {
			return err
		}
	case "sqlite":
		if err := need("sqlite-path", f.sqlitePath); err != nil {
			return err
		}
	case "nats":
		if err := need("nats-url", f.natsURL); err != nil {
			return err
		}
		if len(f.natsURLs()) == 0 {
			return usagef("%s has no URL", f.name("nats-url"))
		}
		for _, u := range f.natsURLs() {
			if err := f.checkNATSURL(u); err != nil {
				return err
			}
		}
	case "redis":
		if err := need("redis-url", f.redisURL); err != nil {
			return err
		}
		if err := f.checkRedisURL(); err != nil {
			return err
		}
		if (f.redisCert == "") != (f.redisKey == "") {
			return usagef("--redis-cert and --redis-key go together (a client certificate): give both or neither")
		}
		if (f.redisCACert != "" || f.redisCert != "") && !strings.HasPrefix(f.redisURL, "rediss://") {
			return usagef("--redis-cacert, --redis-cert and --redis-key are for TLS: %s must start with rediss://", f.name("redis-url"))
		}
	case "cloudflarekv":
		if err := need("cf-account", f.cfAccount); err != nil {
			return err
		}
		if err := need("cf-namespace", f.cfNamespace); err != nil {
			return err
		}
		if f.cfBaseURL != "" {
			if err := f.checkURL("cf-base-url", f.cfBaseURL); err != nil {
				return err
			}
		}
	}
	if f.prefix != "" {
		if _, err := kvbreaker.Prefixed(memory.New(), f.prefix); err != nil {
			return usagef("%s: %v", f.name("prefix"), err)
		}
	}
	return nil
}

func (f *backendFlags) endpoints() []string {
	var eps []string
	for ep := range strings.SplitSeq(f.etcdEndpoints, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			eps = append(eps, ep)
		}
	}
	return eps
}

func (f *backendFlags) checkURL(flagName, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("%s is %q: want an http:// or https:// URL", f.name(flagName), redactURL(raw))
	}
	return nil
}

// maxConnect bounds connecting when --timeout is longer (check's --timeout
// bounds a whole run of minutes).
const maxConnect = 30 * time.Second

// open validates f and connects, within timeout (or maxConnect if shorter).
// Errors other than *usageError are connection failures (exit 1); a server
// that cannot be reached is a *reachError.
func (f *backendFlags) open(ctx context.Context, timeout time.Duration) (*conn, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	bound := min(timeout, maxConnect)
	f.bound = fmt.Sprintf("--timeout %v", timeout)
	if bound < timeout {
		f.bound = fmt.Sprintf("%v (the connection's bound; --timeout %v bounds the whole run)", bound, timeout)
	}
	octx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	return backends[f.backend].open(octx, f)
}

func openEtcd(ctx context.Context, f *backendFlags) (*conn, error) {
	eps := f.endpoints()
	tlsConfig, err := etcdTLS(f)
	if err != nil {
		return nil, err
	}
	shown := make([]string, len(eps))
	for i, ep := range eps {
		shown[i] = redactURL(ep)
	}
	where := strings.Join(shown, ",")
	if err := preflight(ctx, "etcd", eps...); err != nil {
		return nil, err
	}
	s, err := etcd.Dial(ctx, eps, tlsConfig)
	if err != nil {
		if te, ok := errors.AsType[*tlsdiag.Error](err); ok {
			return nil, tlsFlagError(f, te)
		}
		return nil, noAnswer(ctx, "etcd", where, f.bound, err)
	}
	return &conn{describe: "etcd at " + where, store: s}, nil
}

// etcdTLS builds the TLS configuration from the --etcd-* file flags, or nil
// for plain text.
func etcdTLS(f *backendFlags) (*tls.Config, error) {
	return loadTLS(f, "etcd", "etcd-cacert", "etcd-cert", "etcd-key", f.etcdCACert, f.etcdCert, f.etcdKey)
}

// loadTLS builds a TLS configuration from a backend's CA, certificate and
// key files (flags named caFlag, certFlag and keyFlag), or nil if none is
// given.
func loadTLS(f *backendFlags, backend, caFlag, certFlag, keyFlag, caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" && certFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", backend, f.name(caFlag), err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: %s %s: no PEM certificate in it", backend, f.name(caFlag), caFile)
		}
		cfg.RootCAs = pool
	}
	if certFile != "" {
		// LoadX509KeyPair's errors name the files, never their contents.
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%s: --%s/--%s: %w", backend, certFlag, keyFlag, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// dynamoClient makes the DynamoDB client of the flags and checks that an
// --dynamodb-endpoint accepts connections. where names the table for
// output; endpoint is the one the client talks to.
func dynamoClient(ctx context.Context, f *backendFlags) (client *dyn.Client, where, endpoint string, err error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, "", "", fmt.Errorf("dynamodb: loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, "", "", errors.New("dynamodb: no AWS region: set AWS_REGION, or a region in the profile AWS_PROFILE names")
	}
	client = dyn.NewFromConfig(cfg, func(o *dyn.Options) {
		if f.dynamoEndpoint != "" {
			o.BaseEndpoint = aws.String(f.dynamoEndpoint)
		}
	})
	where = "dynamodb table " + f.dynamoTable + " in " + cfg.Region
	endpoint = "https://dynamodb." + cfg.Region + ".amazonaws.com"
	if f.dynamoEndpoint != "" {
		endpoint = redactURL(f.dynamoEndpoint)
		where += " at " + endpoint
		// AWS's own endpoints resolve and answer; an override (DynamoDB
		// Local) is where a closed port is likely.
		if err := preflight(ctx, "dynamodb", f.dynamoEndpoint); err != nil {
			return nil, "", "", err
		}
	}
	return client, where, endpoint, nil
}

func openDynamoDB(ctx context.Context, f *backendFlags) (*conn, error) {
	client, where, endpoint, err := dynamoClient(ctx, f)
	if err != nil {
		return nil, err
	}
	// Fail here, with one clear error, if the table is missing or the
	// credentials are refused.
	if _, err := client.DescribeTable(ctx, &dyn.DescribeTableInput{TableName: aws.String(f.dynamoTable)}); err != nil {
		if ctx.Err() != nil {
			return nil, noAnswer(ctx, "dynamodb", endpoint, f.bound, err)
		}
		if nf, ok := errors.AsType[*types.ResourceNotFoundException](err); ok {
			return nil, fmt.Errorf("dynamodb: table %s does not exist in %s at %s (%s): %s", f.dynamoTable, regionOf(client), endpoint, nf.ErrorCode(), createHint)
		}
		return nil, fmt.Errorf("dynamodb: describe table %s at %s: %w", f.dynamoTable, endpoint, err)
	}
	s, err := dynamodb.New(client, f.dynamoTable)
	if err != nil {
		return nil, err
	}
	return &conn{
		describe: where,
		store:    s,
		purge: func(ctx context.Context, fullKey string) (int, error) {
			out, err := client.DeleteItem(ctx, &dyn.DeleteItemInput{
				TableName:    aws.String(f.dynamoTable),
				Key:          map[string]types.AttributeValue{dynamodb.AttrKey: &types.AttributeValueMemberS{Value: fullKey}},
				ReturnValues: types.ReturnValueAllOld,
			})
			if err != nil {
				return 0, fmt.Errorf("dynamodb: purge %s/%q: %w", f.dynamoTable, fullKey, err)
			}
			return min(len(out.Attributes), 1), nil
		},
	}, nil
}

func regionOf(c *dyn.Client) string { return c.Options().Region }

// cfDefaultBase is the Cloudflare API the SDK talks to without an override.
const cfDefaultBase = "https://api.cloudflare.com/client/v4/"

// openCloudflareKV opens Workers KV. clock, when not nil, is the store's
// clock and advance moves it (tests point them at Miniflare's).
func openCloudflareKV(ctx context.Context, f *backendFlags, clock func() time.Time, advance func(ctx context.Context, d time.Duration) error) (*conn, error) {
	token := os.Getenv(TokenEnv)
	if token == "" {
		return nil, fmt.Errorf("cloudflarekv: %s is not set: export an API token with Workers KV Storage: Edit permission", TokenEnv)
	}
	opts := []option.RequestOption{option.WithAPIToken(token)}
	where := "cloudflarekv namespace " + f.cfNamespace + " of account " + f.cfAccount
	endpoint := cfDefaultBase
	if f.cfBaseURL != "" {
		base := f.cfBaseURL
		if !strings.HasSuffix(base, "/") {
			base += "/"
		}
		opts = append(opts, option.WithBaseURL(base))
		endpoint = redactURL(f.cfBaseURL)
		where += " at " + endpoint
		if err := preflight(ctx, "cloudflarekv", f.cfBaseURL); err != nil {
			return nil, err
		}
	}
	client := kv.NewKVService(opts...)
	o := []cloudflarekv.Option{
		// The padding covers --clock-skew; the store refuses a zero
		// padding (it would declare no bound), so 0 pads by 1 ms.
		cloudflarekv.WithClockSkew(max(f.clockSkew, time.Millisecond)),
		// A write the store gives up is reported by the command.
		cloudflarekv.WithLogger(slog.New(slog.DiscardHandler)),
	}
	if clock != nil {
		o = append(o, cloudflarekv.WithClock(clock))
	}
	s, err := cloudflarekv.New(client, f.cfAccount, f.cfNamespace, o...)
	if err != nil {
		return nil, err
	}
	// One read, so that a wrong token, account or namespace fails here.
	if _, _, err := s.Get(ctx, "kvbreaker-connection-check.invalid"); err != nil && !errors.Is(err, driver.ErrNotFound) {
		_ = s.Close() // ends the read this Get left running
		if ctx.Err() != nil {
			return nil, noAnswer(ctx, "cloudflarekv", endpoint, f.bound, err)
		}
		return nil, fmt.Errorf("checking access to %s (are %s, --cf-account and --cf-namespace right?): %w", where, TokenEnv, err)
	}
	return &conn{describe: where, store: s, advance: advance}, nil
}

// memoryStore is the memory backend's store: one per process, so that the
// commands a test runs in one process see each other's writes.
var memoryStore = memory.New()

func openMemory(context.Context, *backendFlags) (*conn, error) {
	return &conn{describe: "memory (this process)", store: memoryStore}, nil
}
