package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"testing"
	"time"

	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/kvbreaker/kvbreaker/backends/dynamodb"

	"go.uber.org/goleak"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/kvbreaker/kvbreaker/backends/cloudflarekv"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/testservers/dynalite"
	"github.com/kvbreaker/kvbreaker/internal/testservers/etcdtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/miniflare"
	"github.com/kvbreaker/kvbreaker/internal/testservers/servers"
)

// The real servers of the matrix, shared by the package's tests: each test
// uses its own key prefix (check makes its own).
var (
	etcdSrv *etcdtest.Server
	dynSrv  *dynalite.Server
	cfSrv   *miniflare.Server
)

// dynTable is the dynalite table the tests use.
const dynTable = "kvbreaker-cmd"

// Recognisable secrets: no output of the command may contain them.
const (
	awsSecret = "AWSSECRET-must-never-show-4b1d"
	awsKeyID  = "AKIDCMDTESTMUSTNOTSHOW"
)

func TestMain(m *testing.M) {
	code, err := withServers(m.Run)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cmd/kvbreaker: cannot start the servers the tests need: %v\n", err)
		os.Exit(1)
	}
	if code == 0 {
		// Nothing the commands start may outlive them.
		http.DefaultClient.CloseIdleConnections()
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// withServers starts etcd, dynalite and Miniflare concurrently, runs f and
// stops them (by the fixtures' own PIDs).
func withServers(f func() int) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	set, err := servers.Start(ctx)
	if err != nil {
		return 1, err
	}
	defer set.Stop()
	etcdSrv, dynSrv, cfSrv = set.Etcd, set.Dynalite, set.Miniflare
	if err := dynamodb.CreateTable(ctx, newClient(dynSrv.Endpoint), dynTable); err != nil {
		return 1, err
	}
	// The AWS config chain reads only these, never the machine's own
	// files or an instance role.
	for k, v := range map[string]string{
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": awsKeyID, "AWS_SECRET_ACCESS_KEY": awsSecret,
		"AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull, "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_PROFILE": "", TokenEnv: cfSrv.Token,
	} {
		os.Setenv(k, v)
	}
	os.Unsetenv("AWS_PROFILE")
	return f(), nil
}

// connArgs returns the connection flags of each backend against the test
// servers.
func connArgs(backend string) []string {
	switch backend {
	case "etcd":
		return []string{"--backend", "etcd", "--etcd-endpoints", etcdSrv.Endpoints()[0]}
	case "dynamodb":
		return []string{"--backend", "dynamodb", "--dynamodb-table", dynTable, "--dynamodb-endpoint", dynSrv.Endpoint}
	case "cloudflarekv":
		return []string{"--backend", "cloudflarekv", "--cf-account", cfSrv.AccountID, "--cf-namespace", cfSrv.NamespaceID, "--cf-base-url", cfSrv.BaseURL()}
	}
	return []string{"--backend", backend}
}

// earlyStore is a memory store that lets entries vanish 2 s before their
// TTL while declaring exact expiry: the deliberately broken store.
type earlyStore struct{ *memory.Store }

func (s earlyStore) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	return s.Store.CompareAndSwap(ctx, key, old, value, max(time.Millisecond, ttl-2*time.Second))
}

func init() {
	backends["broken-early-expiry"] = variant(func(context.Context, *backendFlags) (*conn, error) {
		return &conn{describe: "memory that expires 2s early (test)", store: earlyStore{memory.New()}}, nil
	}, "memory")
	// Workers KV on Miniflare's clock, which check advances instead of
	// waiting (the fixture's clock stands still otherwise): the store
	// openCloudflareKV makes, on that clock.
	backends["cloudflarekv-miniflare-clock"] = variant(func(ctx context.Context, f *backendFlags) (*conn, error) {
		s, err := cloudflarekv.Dial(ctx, f.get("cf-account"), f.get("cf-namespace"), os.Getenv(TokenEnv), f.get("cf-base-url"),
			cloudflarekv.WithClockSkew(max(f.clockSkew, time.Millisecond)), cloudflarekv.WithLogger(slog.New(slog.DiscardHandler)), cloudflarekv.WithClock(cfSrv.Now))
		if err != nil {
			return nil, err
		}
		return &conn{describe: "cloudflarekv on Miniflare's clock (test)", store: s, advance: cfSrv.Advance}, nil
	}, "cloudflarekv")
}

// newClient returns a DynamoDB client for a local endpoint (dynalite, or
// DynamoDB Local) with static fake credentials and region us-east-1.
func newClient(endpoint string, opts ...func(*dyn.Options)) *dyn.Client {
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDFAKEFORTESTS", "fake-secret-for-tests", "")}
	return dyn.NewFromConfig(cfg, append([]func(*dyn.Options){func(o *dyn.Options) { o.BaseEndpoint = aws.String(endpoint) }}, opts...)...)
}
