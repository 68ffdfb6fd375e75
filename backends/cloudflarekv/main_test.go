package cloudflarekv

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudflare/cloudflare-go/v6/kv"
	"github.com/cloudflare/cloudflare-go/v6/option"
	"go.uber.org/goleak"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/testservers/miniflare"
)

// srv is the package's Miniflare, with Cloudflare's one-write-per-second
// limit on, shared by every test (each uses its own key prefix). Tests that
// throttle it or advance its clock do not run in parallel.
var srv *miniflare.Server

func TestMain(m *testing.M) {
	var err error
	srv, err = miniflare.Start(context.Background(), miniflare.WriteLimit())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	srv.Stop()
	if code == 0 {
		// Nothing of the stores may outlive the tests: no write timers,
		// no reads left running.
		http.DefaultClient.CloseIdleConnections()
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// quiet is the Breakers' logger: they warn that the store is
// last-writer-wins, which these tests know.
var quiet = slog.New(slog.DiscardHandler)

var prefixes atomic.Int64

// uniquePrefix returns a key prefix no other store in this run uses (at
// most 128 bytes, kvbreaker.Prefixed's limit).
func uniquePrefix(name string) string {
	if len(name) > 80 {
		name = name[len(name)-80:]
	}
	return "t" + strconv.FormatInt(prefixes.Add(1), 10) + "-" + name + "/"
}

// client returns a kv client for srv.
func client() *kv.KVService {
	return kv.NewKVService([]option.RequestOption{option.WithBaseURL(srv.BaseURL()), option.WithAPIToken(srv.Token)}...)
}

// tstore is a Store whose keys are kept under a prefix of their own by
// kvbreaker.Prefixed (the adapter has no prefix option), with the adapter
// itself in reach for the tests that look inside it.
type tstore struct {
	*Store
	prefix string
	p      driver.Store
}

func (t *tstore) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	return t.p.Get(ctx, key)
}

func (t *tstore) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	return t.p.CompareAndSwap(ctx, key, old, value, ttl)
}

func (t *tstore) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	return t.p.CompareAndDelete(ctx, key, old)
}

func (t *tstore) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	return t.p.(driver.Lister).List(ctx, prefix, cursor, limit)
}

// prefixed returns s with its keys under prefix.
func prefixed(t testing.TB, s *Store, prefix string) *tstore {
	t.Helper()
	p, err := kvbreaker.Prefixed(s, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return &tstore{Store: s, prefix: prefix, p: p}
}

// newStore returns a store over srv under a fresh prefix, on srv's clock.
func newStore(t testing.TB, opts ...Option) *tstore {
	t.Helper()
	return newPrefixedStore(t, client(), uniquePrefix(t.Name()), opts...)
}

// newPrefixedStore returns a store over c under prefix, on srv's clock,
// flushed when the test ends.
func newPrefixedStore(t testing.TB, c *kv.KVService, prefix string, opts ...Option) *tstore {
	t.Helper()
	all := append([]Option{WithClock(srv.Now)}, opts...)
	s, err := New(c, srv.AccountID, srv.NamespaceID, all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Flush(ctx); err != nil {
			t.Errorf("Flush: %v", err)
		}
	})
	return prefixed(t, s, prefix)
}

// sibling returns a second store over the same keys as s (another process
// of the fleet: its own cache and write queue).
func sibling(t testing.TB, s *tstore, opts ...Option) *tstore {
	t.Helper()
	all := append([]Option{WithClock(srv.Now)}, opts...)
	s2, err := New(client(), srv.AccountID, srv.NamespaceID, all...)
	if err != nil {
		t.Fatal(err)
	}
	return prefixed(t, s2, s.prefix)
}
