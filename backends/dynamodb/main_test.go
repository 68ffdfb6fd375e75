package dynamodb_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"go.uber.org/goleak"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/testservers/dynalite"
)

// The shared dynalite server and table for every test but the fault test,
// which kills its own server.
var (
	srv    *dynalite.Server
	client *dyn.Client
)

const table = "kvbreaker"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	if srv, err = dynalite.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer srv.Stop()
	client = newClient(srv.Endpoint)
	// Every test but the fault test shares this server: if it dies, say
	// so at once, with its own words, rather than through the tests that
	// then fail to connect.
	stopping := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-srv.Done():
			fmt.Fprintf(os.Stderr, "dynalite (the shared test server) exited during the tests; its stderr:\n%s\n", srv.Stderr())
		case <-stopping:
		}
	}()
	unwatch := sync.OnceFunc(func() { close(stopping); <-watched })
	defer unwatch()
	if err := dynamodb.CreateTable(ctx, client, table); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	unwatch()
	srv.Stop()
	if code == 0 {
		// Idle keep-alive connections of the tests' SDK clients are the
		// only goroutines allowed to outlive the tests.
		if err := goleak.Find(
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			return 1
		}
	}
	return code
}

var prefixes atomic.Int64

// uniquePrefix returns a key prefix no other test or store uses (at most
// 128 bytes, kvbreaker.Prefixed's limit).
func uniquePrefix(t testing.TB) string {
	name := strings.ReplaceAll(t.Name(), "/", "_")
	if len(name) > 80 {
		name = name[len(name)-80:]
	}
	return fmt.Sprintf("%s/%d/", name, prefixes.Add(1))
}

// fakeClock is the readers' and writers' clock for tests that move time:
// dynalite never expires anything itself, so the store's clock is the only
// one that matters.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock(t time.Time) *fakeClock {
	c := &fakeClock{}
	c.ns.Store(t.UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
func (c *fakeClock) Set(t time.Time)         { c.ns.Store(t.UnixNano()) }

// newStore returns a store over the shared table under a fresh prefix.
func newStore(t testing.TB, opts ...dynamodb.Option) driver.Store {
	t.Helper()
	return newPrefixed(t, client, uniquePrefix(t), opts...)
}

// newPrefixed returns a store over the shared table through c, with every
// key under prefix (kvbreaker.Prefixed: the adapter has no prefix option).
func newPrefixed(t testing.TB, c *dyn.Client, prefix string, opts ...dynamodb.Option) driver.Store {
	t.Helper()
	s, err := dynamodb.New(c, table, opts...)
	if err != nil {
		t.Fatal(err)
	}
	p, err := kvbreaker.Prefixed(s, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// localEndpoint is the dynalite server TestMain started.
func localEndpoint() string { return srv.Endpoint }

// newClient returns a DynamoDB client for a local endpoint (dynalite, or
// DynamoDB Local) with static fake credentials and region us-east-1.
func newClient(endpoint string, opts ...func(*dyn.Options)) *dyn.Client {
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDFAKEFORTESTS", "fake-secret-for-tests", "")}
	return dyn.NewFromConfig(cfg, append([]func(*dyn.Options){func(o *dyn.Options) { o.BaseEndpoint = aws.String(endpoint) }}, opts...)...)
}
