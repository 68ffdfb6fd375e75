package cloudflarekv

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudflare/cloudflare-go/v6/kv"
	"github.com/cloudflare/cloudflare-go/v6/option"

	"github.com/kvbreaker/kvbreaker/driver"
)

// countingStore returns a store over the API at endpoint whose connections
// are counted, with its own transport, flushed and closed at the end of the
// test.
func countingStore(t *testing.T, endpoint string, opts ...Option) (*Store, *atomic.Int32) {
	t.Helper()
	var dials atomic.Int32
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	c := kv.NewKVService(option.WithBaseURL(endpoint+"/client/v4/"), option.WithAPIToken("t"), option.WithHTTPClient(&http.Client{Transport: tr}))
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
		tr.CloseIdleConnections()
	})
	return s, &dials
}

// storeCalls are the store's calls, each returning its error.
var storeCalls = []struct {
	op, key string
	call    func(context.Context, *Store) error
}{
	{"get", "h.example", func(ctx context.Context, s *Store) error { _, _, err := s.Get(ctx, "h.example"); return err }},
	{"compare-and-swap", "h.example", func(ctx context.Context, s *Store) error {
		_, err := s.CompareAndSwap(ctx, "h.example", driver.NoVersion, []byte("r"), time.Minute)
		return err
	}},
	{"compare-and-delete", "h.example", func(ctx context.Context, s *Store) error { return s.CompareAndDelete(ctx, "h.example", 7) }},
	{"list", "h.", func(ctx context.Context, s *Store) error { _, _, err := s.List(ctx, "h.", "", 10); return err }},
}

// TestUnreachableFailsFast: against a closed port every call returns at
// once, after one connection attempt, with "cannot reach Workers KV at
// <endpoint>: connection refused" in a *driver.OpError (one "cloudflarekv: "
// prefix) matching ErrUnreachable, and a write is not queued again. Fails on
// main before #14 §2 (checked by letting failFast pass dial errors
// through): the errors read "cloudflarekv: get h.example: Get \"http://…\":
// dial tcp …: connect: connection refused", matching nothing; Get, List
// and CompareAndDelete took 1.7–1.8 s (cloudflare-go's one retry) and
// CompareAndSwap 12.5 s (that retry, then the store's resends of a write it
// took for possibly applied).
func TestUnreachableFailsFast(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + ln.Addr().String()
	_ = ln.Close() // nothing listens there now: connections are refused
	for _, c := range storeCalls {
		t.Run(c.op, func(t *testing.T) {
			s, dials := countingStore(t, endpoint)
			start := time.Now()
			err := c.call(t.Context(), s)
			elapsed := time.Since(start)
			if !errors.Is(err, ErrUnreachable) {
				t.Fatalf("err = %v, want one matching ErrUnreachable", err)
			}
			if !errors.Is(err, driver.ErrUnreachable) {
				t.Errorf("err = %v, want one matching driver.ErrUnreachable too", err)
			}
			want := "cloudflarekv: " + c.op + " " + c.key + ": cannot reach Workers KV at " + endpoint + ": connection refused"
			if err.Error() != want {
				t.Errorf("err = %q\nwant  %q", err, want)
			}
			if oe, ok := err.(*driver.OpError); !ok || oe.Op != c.op || oe.Backend != "cloudflarekv" {
				t.Errorf("err = %#v, want a *driver.OpError for %s", err, c.op)
			}
			if ue, ok := errors.AsType[*UnreachableError](err); !ok || len(ue.Endpoints) != 1 || ue.Endpoints[0] != endpoint {
				t.Errorf("err = %v: no *UnreachableError for %s", err, endpoint)
			}
			if elapsed > 2*time.Second {
				t.Errorf("took %v, want well under 2 s", elapsed)
			}
			if err := s.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			if n := dials.Load(); n != 1 {
				t.Errorf("%d connection attempts, want 1 (a refused connection is neither retried nor resent)", n)
			}
		})
	}
}

// silentListener accepts connections and never answers; it stops at the end
// of the test.
func silentListener(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	// Cleanups run last in, first out: the stores' (registered later)
	// flush first, their requests ended by WithCallTimeout.
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// TestSilentEndpointBoundedByContext: an API that accepts connections and
// never answers costs the caller its context's deadline, not more, and the
// error says that nobody answered (and still matches
// context.DeadlineExceeded). Before #14 §2 the bound held too, but the
// error read only "cloudflarekv: get \"h.example\": context deadline
// exceeded".
func TestSilentEndpointBoundedByContext(t *testing.T) {
	endpoint := silentListener(t)
	for _, c := range storeCalls {
		t.Run(c.op, func(t *testing.T) {
			// A short call timeout and no resends, so that the cleanup's
			// Flush ends soon.
			s, _ := countingStore(t, endpoint, WithCallTimeout(500*time.Millisecond), WithMaxRetries(0), WithLogger(quiet))
			s.attempts = 1
			const deadline = 300 * time.Millisecond
			start := time.Now() // before the deadline is set: elapsed cannot undercut it
			ctx, cancel := context.WithTimeout(t.Context(), deadline)
			defer cancel()
			err := c.call(ctx, s)
			elapsed := time.Since(start)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want one matching context.DeadlineExceeded", err)
			}
			if errors.Is(err, ErrUnreachable) {
				t.Errorf("err = %v matches ErrUnreachable: the endpoint was reached", err)
			}
			if want := "no answer from Workers KV at " + endpoint + " before the context ended"; !strings.Contains(err.Error(), want) {
				t.Errorf("err = %q, want it to say %q", err, want)
			}
			if n := strings.Count(err.Error(), "cloudflarekv: "); n != 1 {
				t.Errorf("err = %q: %d \"cloudflarekv: \" prefixes, want 1", err, n)
			}
			if elapsed < deadline || elapsed > deadline+1500*time.Millisecond {
				t.Errorf("took %v, want the %v deadline (plus scheduling)", elapsed, deadline)
			}
		})
	}
}

// TestDotKeysRefused: without the prefix the store used to add, the host
// keys "." and ".." would reach Workers KV as the URL segments "." and
// "..": the store refuses them without a request.
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
