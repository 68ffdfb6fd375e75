package etcd_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/testservers/etcdtest"
)

// server is the embedded etcd shared by the package's tests; endpoints are
// its client URLs.
var (
	server    *etcdtest.Server
	endpoints []string
)

func TestMain(m *testing.M) {
	s, err := etcdtest.Start(context.Background())
	if err != nil {
		fmt.Fprintf(os.Stderr, "backends/etcd: cannot start the embedded etcd the tests need: %v\n", err)
		os.Exit(1)
	}
	server, endpoints = s, s.Endpoints()
	code := m.Run()
	s.Close()
	os.Exit(code)
}

var prefixSeq atomic.Int64

// uniquePrefix returns a key prefix no other test uses.
func uniquePrefix(t testing.TB) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return fmt.Sprintf("test/%s/%d/", name, prefixSeq.Add(1))
}

// newClient returns a client of the shared server, closed when t ends.
func newClient(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// testStore is an etcd Store seen through kvbreaker.Prefixed under a
// prefix of its own, so that tests sharing the server never see each
// other's keys: the embedded driver.Store (Get, CompareAndSwap,
// CompareAndDelete, Traits, and List through Lister) takes the test's
// keys; etcd is the Store itself (Stats, Client, MinTTL); etcd keys are
// prefix+key.
type testStore struct {
	driver.Store
	etcd   *etcd.Store
	prefix string
}

func (s *testStore) Stats() etcd.Stats        { return s.etcd.Stats() }
func (s *testStore) Client() *clientv3.Client { return s.etcd.Client() }
func (s *testStore) MinTTL() time.Duration    { return s.etcd.MinTTL() }

// List implements driver.Lister through the prefix.
func (s *testStore) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	return s.Store.(driver.Lister).List(ctx, prefix, cursor, limit)
}

// isolate puts st under prefix.
func isolate(t testing.TB, st *etcd.Store, prefix string) *testStore {
	t.Helper()
	p, err := kvbreaker.Prefixed(st, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return &testStore{Store: p, etcd: st, prefix: prefix}
}

// newStore returns a Store over the shared server under a fresh prefix.
func newStore(t testing.TB, opts ...etcd.Option) *testStore {
	t.Helper()
	return newStoreUnder(t, uniquePrefix(t), opts...)
}

// newStoreUnder returns a Store over the shared server, with a client of
// its own, under prefix.
func newStoreUnder(t testing.TB, prefix string, opts ...etcd.Option) *testStore {
	t.Helper()
	s, err := etcd.New(newClient(t), opts...)
	if err != nil {
		t.Fatalf("etcd.New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return isolate(t, s, prefix)
}
