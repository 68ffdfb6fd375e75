package cloudflarekv

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudflare/cloudflare-go/v6/kv"
	"github.com/cloudflare/cloudflare-go/v6/option"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

// countingStore returns a store over the API at endpoint whose connections
// are counted, with its own transport, flushed at the end of the test.
func countingStore(t *testing.T, endpoint string, opts ...Option) (*Store, *atomic.Int32) {
	t.Helper()
	tr, dials := backendtest.CountingTransport(t)
	c := kv.NewKVService(option.WithBaseURL(endpoint+"/client/v4/"), option.WithAPIToken(srv.Token), option.WithHTTPClient(&http.Client{Transport: tr}))
	s, err := New(c, srv.AccountID, srv.NamespaceID, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := s.Flush(ctx); err != nil {
			t.Errorf("Flush: %v", err)
		}
	})
	return s, dials
}

// TestUnreachableFailsFast: against a closed port every call returns at
// once, after one connection attempt, typed, and a write is not queued
// again: failFast passes no dial error to cloudflare-go's retry (one
// retry took 1.7 s) nor to the writer's resends of a write that may have
// been applied (12.5 s).
func TestUnreachableFailsFast(t *testing.T) {
	endpoint := "http://" + backendtest.ClosedPort(t)
	backendtest.Unreachable(t, backendtest.Endpoint{
		Backend: "cloudflarekv", Name: "Workers KV", URL: endpoint,
		New: func(t *testing.T) (driver.Store, func() int) {
			s, dials := countingStore(t, endpoint)
			return s, func() int { return int(dials.Load()) }
		},
		Settle: func(t *testing.T, s driver.Store) {
			if err := s.(*Store).Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// TestSilentEndpointBoundedByContext: an API that accepts connections and
// never answers costs the caller its context's deadline, not more, and the
// error says that nobody answered: a bare "context deadline exceeded"
// would not say whether anything listened.
func TestSilentEndpointBoundedByContext(t *testing.T) {
	addr, _ := backendtest.SilentListener(t)
	endpoint := "http://" + addr
	backendtest.Silent(t, backendtest.Endpoint{
		Backend: "cloudflarekv", Name: "Workers KV", URL: endpoint,
		New: func(t *testing.T) (driver.Store, func() int) {
			// A short call timeout and no resends, so that the cleanup's
			// Flush ends soon.
			s, dials := countingStore(t, endpoint, WithCallTimeout(500*time.Millisecond), WithMaxRetries(0), WithLogger(quiet))
			s.attempts = 1
			return s, func() int { return int(dials.Load()) }
		},
	})
}

// TestDotKeysRefused: the host keys "." and ".." would reach Workers KV as
// the URL segments "." and "..", which the HTTP client resolves away: the
// store refuses them without a request.
func TestDotKeysRefused(t *testing.T) {
	s, dials := countingStore(t, "http://127.0.0.1:1")
	for _, key := range []string{".", ".."} {
		_, _, err := s.Get(t.Context(), key)
		if oe, ok := err.(*driver.OpError); !ok || oe.Key != key || !strings.Contains(err.Error(), "wrap the store with kvbreaker.Prefixed") {
			t.Errorf("Get(%q) = %v, want an OpError that says what to do", key, err)
		}
	}
	if n := dials.Load(); n != 0 {
		t.Errorf("%d connection attempts, want none", n)
	}
}
