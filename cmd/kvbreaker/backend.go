package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/cloudflare/cloudflare-go/v6/kv"
	"github.com/cloudflare/cloudflare-go/v6/option"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/cloudflarekv"
	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TokenEnv is the environment variable the cloudflarekv backend reads its
// API token from. There is deliberately no flag: a flag's value shows in ps
// and shell history.
const TokenEnv = "CLOUDFLARE_API_TOKEN"

// backendFlags are the connection flags check, inspect and reset share.
type backendFlags struct {
	backend string
	prefix  string

	etcdEndpoints                 string
	etcdCACert, etcdCert, etcdKey string

	dynamoTable, dynamoEndpoint string

	cfAccount, cfNamespace, cfBaseURL string

	// clockSkew is the fleet's clock-skew bound, passed to stores that pad
	// by it (cloudflarekv) and to the Breakers inspect and reset make.
	clockSkew time.Duration
}

// register adds the connection flags to fs.
func (f *backendFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.backend, "backend", "", "the store: "+strings.Join(backendNames(), ", ")+" (required)")
	fs.StringVar(&f.prefix, "prefix", "", "key prefix your fleet's store uses (default: the backend's own default,\netcd \"kvbreaker/\", cloudflarekv \"kvbreaker:\", dynamodb and memory none)")
	fs.StringVar(&f.etcdEndpoints, "etcd-endpoints", "", "etcd: comma-separated client URLs, e.g. https://etcd-1:2379,https://etcd-2:2379")
	fs.StringVar(&f.etcdCACert, "etcd-cacert", "", "etcd: PEM `file` of the CA that signed the servers' certificates (turns TLS on)")
	fs.StringVar(&f.etcdCert, "etcd-cert", "", "etcd: PEM client certificate `file`, for mutual TLS (with --etcd-key)")
	fs.StringVar(&f.etcdKey, "etcd-key", "", "etcd: PEM client key `file`, for mutual TLS (with --etcd-cert)")
	fs.StringVar(&f.dynamoTable, "dynamodb-table", "", "dynamodb: the table (partition key \"pk\", a String)")
	fs.StringVar(&f.dynamoEndpoint, "dynamodb-endpoint", "", "dynamodb: endpoint `URL` override, for DynamoDB Local or dynalite\n(region and credentials come from the AWS config chain: AWS_REGION, AWS_PROFILE, ...)")
	fs.StringVar(&f.cfAccount, "cf-account", "", "cloudflarekv: the account ID")
	fs.StringVar(&f.cfNamespace, "cf-namespace", "", "cloudflarekv: the Workers KV namespace ID\n(the API token is read from "+TokenEnv+", never from a flag)")
	fs.StringVar(&f.cfBaseURL, "cf-base-url", "", "cloudflarekv: API base `URL` override, e.g. a local Miniflare's http://127.0.0.1:8787/client/v4/")
	fs.DurationVar(&f.clockSkew, "clock-skew", kvbreaker.DefaultClockSkew, "the fleet's clock-skew bound (Settings.ClockSkew)")
}

// backendFlagsHelp is the part of a command's --help that shows each
// backend's flags by example.
const backendFlagsHelp = `Backends and their connection flags (the same for check, inspect and reset):
  etcd          --etcd-endpoints https://etcd-1:2379,https://etcd-2:2379
                [--etcd-cacert ca.pem [--etcd-cert client.pem --etcd-key client-key.pem]]
  dynamodb      --dynamodb-table kvbreaker [--dynamodb-endpoint http://localhost:8000]
                region and credentials from the AWS config chain (AWS_REGION,
                AWS_PROFILE, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, SSO, instance role)
  cloudflarekv  --cf-account ACCOUNT_ID --cf-namespace NAMESPACE_ID
                [--cf-base-url http://127.0.0.1:8787/client/v4/]
                with the API token in ` + TokenEnv + ` (Workers KV Storage: Edit)
  memory        no flags: a store inside this process, empty at start (a demo)
--prefix must be the key prefix your fleet's store was built with.
`

// A conn is an open connection to one deployment's store.
type conn struct {
	// describe names the deployment without credentials, for output.
	describe string
	// defaultPrefix is the backend's own prefix, used when --prefix is
	// empty; sep separates a prefix from what check appends to it.
	defaultPrefix, sep string
	// store returns a store whose keys all start with prefix.
	store func(prefix string) (driver.Store, error)
	// purge, when set, removes the physical remains of an entry that has
	// expired logically (fullKey includes the prefix): DynamoDB keeps
	// expired items until its TTL sweep, days later.
	purge func(ctx context.Context, fullKey string) error
	// advance, when set, moves the backend's clock (test servers only).
	advance func(ctx context.Context, d time.Duration) error
	// close releases the connection.
	close func()
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
}

func backendNames() []string {
	var names []string
	for n := range backends {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// usageError is a problem with the flags: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// validate checks the flags for the chosen backend without touching the
// network: a missing or misplaced flag is a usage error.
func (f *backendFlags) validate() error {
	if f.backend == "" {
		return usagef("--backend is required: one of %s", strings.Join(backendNames(), ", "))
	}
	def, ok := backends[f.backend]
	if !ok {
		return usagef("--backend is %q: want one of %s", f.backend, strings.Join(backendNames(), ", "))
	}
	if f.clockSkew < 0 {
		return usagef("--clock-skew is %v: want zero or more", f.clockSkew)
	}
	type fl struct {
		name, value, backend string
	}
	all := []fl{
		{"etcd-endpoints", f.etcdEndpoints, "etcd"}, {"etcd-cacert", f.etcdCACert, "etcd"},
		{"etcd-cert", f.etcdCert, "etcd"}, {"etcd-key", f.etcdKey, "etcd"},
		{"dynamodb-table", f.dynamoTable, "dynamodb"}, {"dynamodb-endpoint", f.dynamoEndpoint, "dynamodb"},
		{"cf-account", f.cfAccount, "cloudflarekv"}, {"cf-namespace", f.cfNamespace, "cloudflarekv"},
		{"cf-base-url", f.cfBaseURL, "cloudflarekv"},
	}
	for _, x := range all {
		if x.value != "" && x.backend != def.flags {
			return usagef("--%s is a %s flag, but --backend is %s", x.name, x.backend, f.backend)
		}
	}
	need := func(name, value string) error {
		if value == "" {
			return usagef("--backend %s needs --%s", f.backend, name)
		}
		return nil
	}
	switch def.flags {
	case "etcd":
		if err := need("etcd-endpoints", f.etcdEndpoints); err != nil {
			return err
		}
		if (f.etcdCert == "") != (f.etcdKey == "") {
			return usagef("--etcd-cert and --etcd-key go together (mutual TLS): give both or neither")
		}
	case "dynamodb":
		if err := need("dynamodb-table", f.dynamoTable); err != nil {
			return err
		}
		if f.dynamoEndpoint != "" {
			if err := checkURL("dynamodb-endpoint", f.dynamoEndpoint); err != nil {
				return err
			}
		}
	case "cloudflarekv":
		if err := need("cf-account", f.cfAccount); err != nil {
			return err
		}
		if err := need("cf-namespace", f.cfNamespace); err != nil {
			return err
		}
		if f.cfBaseURL != "" {
			if err := checkURL("cf-base-url", f.cfBaseURL); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkURL(flagName, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("--%s is %q: want an http:// or https:// URL", flagName, redactURL(raw))
	}
	return nil
}

// redactURL drops user information from a URL, for output.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if i := strings.LastIndex(raw, "@"); i >= 0 {
			return "…@" + raw[i+1:]
		}
		return raw
	}
	u.User = nil
	return u.String()
}

// open validates f and connects. Errors other than *usageError are
// connection failures (exit 1).
func (f *backendFlags) open(ctx context.Context) (*conn, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	c, err := backends[f.backend].open(ctx, f)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// basePrefix is --prefix, or the backend's default.
func (f *backendFlags) basePrefix(c *conn) string {
	if f.prefix != "" {
		return f.prefix
	}
	return c.defaultPrefix
}

func openEtcd(ctx context.Context, f *backendFlags) (*conn, error) {
	var eps []string
	for ep := range strings.SplitSeq(f.etcdEndpoints, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			eps = append(eps, ep)
		}
	}
	if len(eps) == 0 {
		return nil, usagef("--etcd-endpoints has no endpoint")
	}
	tlsConfig, err := etcdTLS(f)
	if err != nil {
		return nil, err
	}
	shown := make([]string, len(eps))
	for i, ep := range eps {
		shown[i] = redactURL(ep)
	}
	// One client for all the stores (each a prefix over it).
	first, err := etcd.Dial(ctx, eps, tlsConfig)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	stores := []*etcd.Store{first}
	return &conn{
		describe:      "etcd at " + strings.Join(shown, ","),
		defaultPrefix: etcd.DefaultPrefix,
		sep:           "/",
		store: func(prefix string) (driver.Store, error) {
			s, err := etcd.New(first.Client(), etcd.WithPrefix(prefix), etcd.WithMinTTL(first.MinTTL()))
			if err != nil {
				return nil, err
			}
			mu.Lock()
			stores = append(stores, s)
			mu.Unlock()
			return s, nil
		},
		close: func() {
			mu.Lock()
			defer mu.Unlock()
			for i := len(stores) - 1; i >= 0; i-- {
				stores[i].Close()
			}
		},
	}, nil
}

// etcdTLS builds the TLS configuration from the --etcd-* file flags, or nil
// for plain text.
func etcdTLS(f *backendFlags) (*tls.Config, error) {
	if f.etcdCACert == "" && f.etcdCert == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.etcdCACert != "" {
		pem, err := os.ReadFile(f.etcdCACert)
		if err != nil {
			return nil, fmt.Errorf("etcd: --etcd-cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd: --etcd-cacert %s: no PEM certificate in it", f.etcdCACert)
		}
		cfg.RootCAs = pool
	}
	if f.etcdCert != "" {
		// LoadX509KeyPair's errors name the files, never their contents.
		pair, err := tls.LoadX509KeyPair(f.etcdCert, f.etcdKey)
		if err != nil {
			return nil, fmt.Errorf("etcd: --etcd-cert/--etcd-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

func openDynamoDB(ctx context.Context, f *backendFlags) (*conn, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("dynamodb: loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("dynamodb: no AWS region: set AWS_REGION, or a region in the profile AWS_PROFILE names")
	}
	client := dyn.NewFromConfig(cfg, func(o *dyn.Options) {
		if f.dynamoEndpoint != "" {
			o.BaseEndpoint = aws.String(f.dynamoEndpoint)
		}
	})
	where := "dynamodb table " + f.dynamoTable + " in " + cfg.Region
	if f.dynamoEndpoint != "" {
		where += " at " + redactURL(f.dynamoEndpoint)
	}
	// Fail here, with one clear error, if the table is missing or the
	// credentials are refused.
	if _, err := client.DescribeTable(ctx, &dyn.DescribeTableInput{TableName: aws.String(f.dynamoTable)}); err != nil {
		return nil, fmt.Errorf("dynamodb: describe table %s: %w", f.dynamoTable, err)
	}
	return &conn{
		describe: where,
		sep:      "/",
		store: func(prefix string) (driver.Store, error) {
			return dynamodb.New(client, f.dynamoTable, dynamodb.WithKeyPrefix(prefix))
		},
		purge: func(ctx context.Context, fullKey string) error {
			_, err := client.DeleteItem(ctx, &dyn.DeleteItemInput{
				TableName: aws.String(f.dynamoTable),
				Key:       map[string]types.AttributeValue{dynamodb.AttrKey: &types.AttributeValueMemberS{Value: fullKey}},
			})
			if err != nil {
				return fmt.Errorf("dynamodb: purge %s/%q: %w", f.dynamoTable, fullKey, err)
			}
			return nil
		},
		close: func() {},
	}, nil
}

// openCloudflareKV opens Workers KV. clock, when not nil, is the stores'
// clock and advance moves it (tests point them at Miniflare's).
func openCloudflareKV(ctx context.Context, f *backendFlags, clock func() time.Time, advance func(ctx context.Context, d time.Duration) error) (*conn, error) {
	token := os.Getenv(TokenEnv)
	if token == "" {
		return nil, fmt.Errorf("cloudflarekv: %s is not set: export an API token with Workers KV Storage: Edit permission", TokenEnv)
	}
	opts := []option.RequestOption{option.WithAPIToken(token)}
	where := "cloudflarekv namespace " + f.cfNamespace + " of account " + f.cfAccount
	if f.cfBaseURL != "" {
		base := f.cfBaseURL
		if !strings.HasSuffix(base, "/") {
			base += "/"
		}
		opts = append(opts, option.WithBaseURL(base))
		where += " at " + redactURL(f.cfBaseURL)
	}
	client := kv.NewKVService(opts...)
	var mu sync.Mutex
	var stores []*cloudflarekv.Store
	newStore := func(prefix string) (*cloudflarekv.Store, error) {
		o := []cloudflarekv.Option{
			// The padding covers --clock-skew; the store refuses a zero
			// padding (it would declare no bound), so 0 pads by 1 ms.
			cloudflarekv.WithPrefix(prefix), cloudflarekv.WithClockSkew(max(f.clockSkew, time.Millisecond)),
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
		mu.Lock()
		stores = append(stores, s)
		mu.Unlock()
		return s, nil
	}
	// One read, so that a wrong token, account or namespace fails here.
	probe, err := newStore(cloudflarekv.DefaultPrefix)
	if err != nil {
		return nil, err
	}
	if _, _, err := probe.Get(ctx, "kvbreaker-connection-check.invalid"); err != nil && !errors.Is(err, driver.ErrNotFound) {
		return nil, fmt.Errorf("checking access to %s (are %s, --cf-account and --cf-namespace right?): %w", where, TokenEnv, err)
	}
	return &conn{
		describe:      where,
		defaultPrefix: cloudflarekv.DefaultPrefix,
		sep:           ":",
		store: func(prefix string) (driver.Store, error) {
			return newStore(prefix)
		},
		advance: advance,
		close: func() {
			// Send what is queued before returning: a Breaker's failure
			// or a reset must not be lost on exit.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			mu.Lock()
			defer mu.Unlock()
			for _, s := range stores {
				_ = s.Flush(ctx)
			}
		},
	}, nil
}

// memoryStore is the memory backend's store: one per process, so that the
// commands a test runs in one process see each other's writes.
var memoryStore = memory.New()

func openMemory(context.Context, *backendFlags) (*conn, error) {
	return &conn{
		describe: "memory (this process)",
		sep:      "/",
		store: func(prefix string) (driver.Store, error) {
			return prefixStore{memoryStore, prefix}, nil
		},
		close: func() {},
	}, nil
}

// prefixStore prepends a prefix to every key of a store that has no
// prefix option of its own.
type prefixStore struct {
	driver.Store
	prefix string
}

func (p prefixStore) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	return p.Store.Get(ctx, p.prefix+key)
}

func (p prefixStore) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	return p.Store.CompareAndSwap(ctx, p.prefix+key, old, value, ttl)
}

func (p prefixStore) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	return p.Store.CompareAndDelete(ctx, p.prefix+key, old)
}
