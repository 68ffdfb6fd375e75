package dynamodb_test

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

	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/driver"
)

// countingClient returns a client for endpoint whose connections are
// counted, with its own transport (closed at the end of the test).
func countingClient(t *testing.T, endpoint string) (*dyn.Client, *atomic.Int32) {
	var dials atomic.Int32
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return newClient(endpoint, func(o *dyn.Options) { o.HTTPClient = &http.Client{Transport: tr} }), &dials
}

// storeCalls are the store's calls, each returning its error.
var storeCalls = []struct {
	op   string
	call func(context.Context, *dynamodb.Store) error
}{
	{"get", func(ctx context.Context, s *dynamodb.Store) error { _, _, err := s.Get(ctx, "h.example"); return err }},
	{"compare-and-swap", func(ctx context.Context, s *dynamodb.Store) error {
		_, err := s.CompareAndSwap(ctx, "h.example", driver.NoVersion, []byte("r"), time.Minute)
		return err
	}},
	{"compare-and-delete", func(ctx context.Context, s *dynamodb.Store) error { return s.CompareAndDelete(ctx, "h.example", 7) }},
	{"list", func(ctx context.Context, s *dynamodb.Store) error { _, _, err := s.List(ctx, "h.", "", 10); return err }},
}

// TestUnreachableFailsFast: against a closed port every call returns at
// once, after one connection attempt, with "cannot reach dynamodb at
// <endpoint>: connection refused" in a *driver.OpError (one "dynamodb: "
// prefix), matching dynamodb.ErrUnreachable. Fails on main before #14 §2
// (checked by letting the retryer retry dial errors again): 4 connection
// attempts, and "dynamodb: get h.example: operation error DynamoDB:
// GetItem, exceeded maximum number of attempts, 4, https response error
// StatusCode: 0, RequestID: , request send failed, Post …: dial tcp …:
// connect: connection refused". (With this test client those attempts took
// 53–140 ms; the retries' backoff is the client's retryer's.)
func TestUnreachableFailsFast(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + ln.Addr().String()
	_ = ln.Close() // nothing listens there now: connections are refused
	for _, c := range storeCalls {
		t.Run(c.op, func(t *testing.T) {
			cl, dials := countingClient(t, endpoint)
			s, err := dynamodb.New(cl, table)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err = c.call(t.Context(), s)
			elapsed := time.Since(start)
			if !errors.Is(err, dynamodb.ErrUnreachable) {
				t.Fatalf("err = %v, want one matching dynamodb.ErrUnreachable", err)
			}
			if !errors.Is(err, driver.ErrUnreachable) {
				t.Errorf("err = %v, want one matching driver.ErrUnreachable too", err)
			}
			key := "h.example"
			if c.op == "list" {
				key = "h."
			}
			want := "dynamodb: " + c.op + " " + key + ": cannot reach dynamodb at " + endpoint + ": connection refused"
			if err.Error() != want {
				t.Errorf("err = %q\nwant  %q", err, want)
			}
			if oe, ok := err.(*driver.OpError); !ok || oe.Op != c.op || oe.Backend != "dynamodb" {
				t.Errorf("err = %#v, want a *driver.OpError for %s", err, c.op)
			}
			if ue, ok := errors.AsType[*dynamodb.UnreachableError](err); !ok || len(ue.Endpoints) != 1 || ue.Endpoints[0] != endpoint {
				t.Errorf("err = %v: no *dynamodb.UnreachableError for %s", err, endpoint)
			}
			if n := dials.Load(); n != 1 {
				t.Errorf("%d connection attempts, want 1 (a refused connection is not retried)", n)
			}
			if elapsed > 2*time.Second {
				t.Errorf("took %v, want well under 2 s", elapsed)
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

// TestSilentEndpointBoundedByContext: an endpoint that accepts connections
// and never answers costs the caller its context's deadline, not more, and
// the error says that nobody answered (and still matches
// context.DeadlineExceeded). Before #14 §2 the bound held too, but the
// error read only "…: operation error DynamoDB: GetItem, https response
// error StatusCode: 0, RequestID: , canceled, context deadline exceeded".
func TestSilentEndpointBoundedByContext(t *testing.T) {
	endpoint := silentListener(t)
	for _, c := range storeCalls {
		t.Run(c.op, func(t *testing.T) {
			cl, _ := countingClient(t, endpoint)
			s, err := dynamodb.New(cl, table)
			if err != nil {
				t.Fatal(err)
			}
			const deadline = 300 * time.Millisecond
			start := time.Now() // before the deadline is set: elapsed cannot undercut it
			ctx, cancel := context.WithTimeout(t.Context(), deadline)
			defer cancel()
			err = c.call(ctx, s)
			elapsed := time.Since(start)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want one matching context.DeadlineExceeded", err)
			}
			if errors.Is(err, dynamodb.ErrUnreachable) {
				t.Errorf("err = %v matches ErrUnreachable: the endpoint was reached", err)
			}
			if want := "no answer from dynamodb at " + endpoint + " before the context ended"; !strings.Contains(err.Error(), want) {
				t.Errorf("err = %q, want it to say %q", err, want)
			}
			if n := strings.Count(err.Error(), "dynamodb: "); n != 1 {
				t.Errorf("err = %q: %d \"dynamodb: \" prefixes, want 1", err, n)
			}
			if elapsed < deadline || elapsed > deadline+1500*time.Millisecond {
				t.Errorf("took %v, want the %v deadline (plus scheduling)", elapsed, deadline)
			}
		})
	}
}
