package redis_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// srv is the shared redis-server for every test but the fault tests and
// the Cluster test, which start their own.
var srv *redistest.Server

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// go-redis logs every failed dial and Sentinel switch; the failover
	// tests cause hundreds.
	goredis.SetLogger(quietLogger{})
	var err error
	if srv, err = redistest.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer srv.Close()
	code := m.Run()
	closeReplicated()
	srv.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			return 1
		}
	}
	return code
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

var prefixes atomic.Int64

// uniquePrefix returns a key prefix no other test or store uses.
func uniquePrefix(t testing.TB) string {
	name := strings.ReplaceAll(t.Name(), "/", "_")
	if len(name) > 80 {
		name = name[len(name)-80:]
	}
	return fmt.Sprintf("%s/%d/", name, prefixes.Add(1))
}

// newClient returns a client of addr, closed when t ends.
func newClient(t testing.TB, addr string, opts ...func(*goredis.Options)) *goredis.Client {
	t.Helper()
	o := &goredis.Options{Addr: addr, ContextTimeoutEnabled: true}
	for _, f := range opts {
		f(o)
	}
	c := goredis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newRaw returns the adapter (no prefix) over a new client of addr.
func newRaw(t testing.TB, addr string, opts ...func(*goredis.Options)) *redis.Store {
	t.Helper()
	s, err := redis.New(newClient(t, addr, opts...))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newStoreUnder returns a store over addr with every key under prefix.
func newStoreUnder(t testing.TB, c goredis.UniversalClient, prefix string) driver.Store {
	t.Helper()
	s, err := redis.New(c)
	if err != nil {
		t.Fatal(err)
	}
	p, err := kvbreaker.Prefixed(s, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
