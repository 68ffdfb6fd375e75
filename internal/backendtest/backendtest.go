// Package backendtest holds what the backends' own tests share beyond the
// conformance suite: paging through a Lister and what a listing leaves out
// (LiveListing), endpoints that refuse or
// never answer, a dial-counting HTTP transport, and the checks of a store's
// calls against them (a refused connection fails at once with an
// *driver.UnreachableError; a silent endpoint costs the call its context),
// and of a Store's calls after Close (ClosedCalls, StoreCalls).
// It is for tests only and imports nothing but driver and the standard
// library.
package backendtest

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

	"github.com/kvbreaker/kvbreaker/driver"
)

// maxPages bounds one listing: a store whose Scan examines a shared table's
// every item (DynamoDB) may answer many empty pages before the end.
const maxPages = 10_000

// ListOption adds a check to ListAll.
type ListOption func(*listOptions)

type listOptions struct{ name func(string) string }

// InOrder makes ListAll check that keys come in ascending byte order of
// name(key) within and across pages, and that each cursor ends with its
// page's last name: memory's and etcd's List, whose cursor is the store's
// last key (through kvbreaker.Prefixed, with the prefix before it). name
// is the key as the store orders it (nil: the key itself).
func InOrder(name func(string) string) ListOption {
	if name == nil {
		name = func(k string) string { return k }
	}
	return func(o *listOptions) { o.name = name }
}

// ListAll pages through l's keys under prefix, limit at a time, and
// returns every key and the number of pages. It fails t if a call errs, a
// page holds more than limit keys, a cursor comes back twice, or the
// listing does not end.
func ListAll(t testing.TB, l driver.Lister, prefix string, limit int, opts ...ListOption) (keys []string, pages int) {
	t.Helper()
	var o listOptions
	for _, opt := range opts {
		opt(&o)
	}
	seen := map[string]bool{}
	cursor := ""
	for {
		page, next, err := l.List(t.Context(), prefix, cursor, limit)
		if err != nil {
			t.Fatalf("List(%q, %q, %d): %v", prefix, cursor, limit, err)
		}
		pages++
		if len(page) > limit {
			t.Fatalf("List(%q, %q, %d) returned %d keys", prefix, cursor, limit, len(page))
		}
		if o.name != nil {
			for i, k := range page {
				if (i > 0 && o.name(k) <= o.name(page[i-1])) || (i == 0 && len(keys) > 0 && o.name(k) <= o.name(keys[len(keys)-1])) {
					t.Fatalf("page %q after %q: not in order", page, keys)
				}
			}
			if next != "" && !strings.HasSuffix(next, o.name(page[len(page)-1])) {
				t.Fatalf("next cursor %q, want the page's last key %q", next, page[len(page)-1])
			}
		}
		keys = append(keys, page...)
		if next == "" {
			return keys, pages
		}
		if seen[next] || pages >= maxPages {
			t.Fatalf("List(%q, …, %d) has not ended after %d pages (cursor %q)", prefix, limit, pages, next)
		}
		seen[next] = true
		cursor = next
	}
}

// ClosedPort returns a loopback host:port where nothing listens, so a
// connection to it is refused.
func ClosedPort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// SilentListener accepts connections on a loopback port and never answers;
// accepted counts the connections so far. It and its connections close when
// the test ends: cleanups run last in, first out, so a store made after it
// (and closed in a cleanup) ends its own requests first.
func SilentListener(t testing.TB) (addr string, accepted func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return len(conns) }
}

// CountingTransport returns an HTTP transport of its own whose connection
// attempts are counted; its idle connections close when the test ends.
func CountingTransport(t testing.TB) (*http.Transport, *atomic.Int32) {
	var dials atomic.Int32
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return tr, &dials
}

// Call is one of a store's calls, on key.
type Call struct {
	Op, Key string
	Do      func(context.Context, driver.Store) error
}

// Calls are a Lister's four calls, each on a key (List: a prefix) that
// the store under test never holds.
var Calls = []Call{
	{"get", "h.example", func(ctx context.Context, s driver.Store) error { _, _, err := s.Get(ctx, "h.example"); return err }},
	{"compare-and-swap", "h.example", func(ctx context.Context, s driver.Store) error {
		_, err := s.CompareAndSwap(ctx, "h.example", driver.NoVersion, []byte("r"), time.Minute)
		return err
	}},
	{"compare-and-delete", "h.example", func(ctx context.Context, s driver.Store) error { return s.CompareAndDelete(ctx, "h.example", 7) }},
	{"list", "h.", func(ctx context.Context, s driver.Store) error {
		l, ok := s.(driver.Lister)
		if !ok {
			return errors.ErrUnsupported
		}
		_, _, err := l.List(ctx, "h.", "", 10)
		return err
	}},
}

// Endpoint is a store under test over one endpoint, made per call by
// Unreachable and Silent.
type Endpoint struct {
	// Backend is the OpError's backend and the message's prefix
	// ("dynamodb"); Name is how the message names the server ("Workers
	// KV"); URL is the endpoint as the messages quote it.
	Backend, Name, URL string
	// New returns a store over URL and its connection attempts so far.
	New func(t *testing.T) (driver.Store, func() int)
	// Settle, if set, runs after the call and before the connection
	// attempts are counted (a store that queues writes flushes them).
	Settle func(t *testing.T, s driver.Store)
}

// Unreachable checks each of Calls on a store over an endpoint where
// nothing listens: the call returns within 2 s, after one connection
// attempt, with "<backend>: <op> <key>: cannot reach <name> at <url>:
// connection refused", a *driver.OpError whose cause is an
// *driver.UnreachableError for url.
func Unreachable(t *testing.T, e Endpoint) {
	for _, c := range Calls {
		t.Run(c.Op, func(t *testing.T) {
			s, dials := e.New(t)
			start := time.Now()
			err := c.Do(t.Context(), s)
			elapsed := time.Since(start)
			if !errors.Is(err, driver.ErrUnreachable) {
				t.Fatalf("err = %v, want one matching driver.ErrUnreachable", err)
			}
			want := e.Backend + ": " + c.Op + " " + c.Key + ": cannot reach " + e.Name + " at " + e.URL + ": connection refused"
			if err.Error() != want {
				t.Errorf("err = %q\nwant  %q", err, want)
			}
			if oe, ok := err.(*driver.OpError); !ok || oe.Op != c.Op || oe.Backend != e.Backend {
				t.Errorf("err = %#v, want a *driver.OpError for %s", err, c.Op)
			}
			if ue, ok := errors.AsType[*driver.UnreachableError](err); !ok || len(ue.Endpoints) != 1 || ue.Endpoints[0] != e.URL {
				t.Errorf("err = %v: no *driver.UnreachableError for %s", err, e.URL)
			}
			if elapsed > 2*time.Second {
				t.Errorf("took %v, want well under 2 s", elapsed)
			}
			if e.Settle != nil {
				e.Settle(t, s)
			}
			if n := dials(); n != 1 {
				t.Errorf("%d connection attempts, want 1 (a refused connection is neither retried nor resent)", n)
			}
		})
	}
}

// Silent checks each of Calls on a store over an endpoint that accepts
// connections and never answers: the call costs its context's deadline
// (300 ms), not more, and its error matches context.DeadlineExceeded, not
// driver.ErrUnreachable (the endpoint was reached), says "no answer from
// <name> at <url> before the context ended", and names the backend once.
func Silent(t *testing.T, e Endpoint) {
	for _, c := range Calls {
		t.Run(c.Op, func(t *testing.T) {
			s, _ := e.New(t)
			const deadline = 300 * time.Millisecond
			start := time.Now() // before the deadline is set: elapsed cannot undercut it
			ctx, cancel := context.WithTimeout(t.Context(), deadline)
			defer cancel()
			err := c.Do(ctx, s)
			elapsed := time.Since(start)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want one matching context.DeadlineExceeded", err)
			}
			if errors.Is(err, driver.ErrUnreachable) {
				t.Errorf("err = %v matches ErrUnreachable: the endpoint was reached", err)
			}
			if want := "no answer from " + e.Name + " at " + e.URL + " before the context ended"; !strings.Contains(err.Error(), want) {
				t.Errorf("err = %q, want it to say %q", err, want)
			}
			if n := strings.Count(err.Error(), e.Backend+": "); n != 1 {
				t.Errorf("err = %q: %d %q prefixes, want 1", err, n, e.Backend+": ")
			}
			if elapsed < deadline || elapsed > deadline+1500*time.Millisecond {
				t.Errorf("took %v, want the %v deadline (plus scheduling)", elapsed, deadline)
			}
		})
	}
}
