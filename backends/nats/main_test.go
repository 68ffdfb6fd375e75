package nats_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/kvbreaker/kvbreaker"
	kvnats "github.com/kvbreaker/kvbreaker/backends/nats"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/testservers/natstest"
)

// server is the NATS server shared by the package's tests.
var server *natstest.Server

func TestMain(m *testing.M) {
	s, err := natstest.Start(context.Background())
	if err != nil {
		fmt.Fprintf(os.Stderr, "backends/nats: cannot start the NATS server the tests need: %v\n", err)
		os.Exit(1)
	}
	server = s
	code := m.Run()
	s.Close()
	os.Exit(code)
}

// bucket is the bucket the package's tests share (under prefixes of their
// own).
const bucket = "kvbreaker_test"

var prefixSeq atomic.Int64

// uniquePrefix returns a key prefix no other test uses.
func uniquePrefix(t testing.TB) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return fmt.Sprintf("test/%s/%d/", name, prefixSeq.Add(1))
}

// quiet drops nats.go's printed asynchronous errors (a reset socket).
var quiet = natsgo.ErrorHandler(func(*natsgo.Conn, *natsgo.Subscription, error) {})

// natsDontRandomize makes a connection try the servers in the order given.
var natsDontRandomize = natsgo.DontRandomize()

// connect returns a connection to url, closed when t ends.
func connect(t testing.TB, url string, opts ...natsgo.Option) *natsgo.Conn {
	t.Helper()
	opts = append([]natsgo.Option{natsgo.MaxReconnects(-1), natsgo.ReconnectWait(100 * time.Millisecond), natsgo.ReconnectBufSize(-1), quiet}, opts...)
	nc, err := natsgo.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// testStore is a Store seen through kvbreaker.Prefixed under a prefix of
// its own: the embedded driver.Store takes the test's keys; nats is the
// Store itself.
type testStore struct {
	driver.Store
	nats   *kvnats.Store
	prefix string
}

// List implements driver.Lister through the prefix.
func (s *testStore) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	return s.Store.(driver.Lister).List(ctx, prefix, cursor, limit)
}

// Follow implements driver.Follower through the prefix.
func (s *testStore) Follow(ctx context.Context, prefix string, heartbeat time.Duration, fn func(driver.Change)) error {
	return s.Store.(driver.Follower).Follow(ctx, prefix, heartbeat, fn)
}

func isolate(t testing.TB, st *kvnats.Store, prefix string) *testStore {
	t.Helper()
	p, err := kvbreaker.Prefixed(st, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return &testStore{Store: p, nats: st, prefix: prefix}
}

// newStore returns a Store over the shared server under a fresh prefix.
func newStore(t testing.TB, opts ...kvnats.Option) *testStore {
	t.Helper()
	return newStoreUnder(t, uniquePrefix(t), opts...)
}

// newStoreUnder returns a Store with a connection of its own under prefix.
func newStoreUnder(t testing.TB, prefix string, opts ...kvnats.Option) *testStore {
	t.Helper()
	s, err := kvnats.New(t.Context(), connect(t, server.URL()), bucket, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return isolate(t, s, prefix)
}
