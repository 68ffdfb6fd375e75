package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/faultfleet"
)

// startProxy puts a fault proxy in front of the shared embedded etcd.
func startProxy(t testing.TB) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(strings.TrimPrefix(endpoints[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// proxiedStore is a Store whose client talks to etcd through p, under
// prefix.
func proxiedStore(t testing.TB, p *faultproxy.Proxy, prefix string) *testStore {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + p.Addr()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	s, err := etcd.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	return isolate(t, s, prefix)
}

// TestTxnAnswerLostIsNotRetried: an applied write whose answer was lost
// must not come back as a conflict carrying the call's own write. clientv3
// does not retry a write Txn whose answer was lost after etcd applied it
// (its retry interceptor retries mutations only when no connection was
// available, i.e. before sending: client/v3/retry.go isSafeRetryMutableRPC,
// and gRPC retries transparently only streams the server never saw). So the
// adapter never meets its own write as a conflict within one call; the
// caller gets a prompt transport error, an outcome it must treat as
// unknown, and the key holds the write. The proxy counts one request (one
// HTTP/2 stream) for the call: a retry would make two, and would return a
// *driver.ConflictError carrying this call's own write.
func TestTxnAnswerLostIsNotRetried(t *testing.T) {
	p := startProxy(t)
	prefix := uniquePrefix(t)
	s := proxiedStore(t, p, prefix)
	direct := newStoreUnder(t, prefix)
	ctx := t.Context()
	const ttl = time.Minute
	const timeout = 2 * time.Second
	// Warm up: the pooled lease for ttl exists, so the armed request below
	// is the Txn itself and not a Grant.
	if _, err := s.CompareAndSwap(ctx, "warm", driver.NoVersion, []byte("w"), ttl); err != nil {
		t.Fatal(err)
	}

	lose := func(t *testing.T, op string, call func(context.Context) error) {
		t.Helper()
		before := p.Stats()
		if err := p.DropNextAnswer(ctx); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		start := time.Now()
		err := call(cctx)
		el := time.Since(start)
		after := p.Stats()
		t.Logf("%s with its answer lost: %v after %v; proxy requests +%d", op, err, el.Round(time.Millisecond), after.Requests-before.Requests)
		if err == nil || errors.Is(err, driver.ErrConflict) || errors.Is(err, driver.ErrNotFound) {
			t.Fatalf("%s: got %v, want a transport error (outcome unknown)", op, err)
		}
		if !strings.HasPrefix(err.Error(), "etcd: "+op) {
			t.Errorf("error %q does not say the operation", err)
		}
		if after.Dropped-before.Dropped != 1 || after.AnswerTimeouts != before.AnswerTimeouts {
			t.Fatalf("proxy %+v: the answer was not dropped after etcd answered", after)
		}
		if n := after.Requests - before.Requests; n != 1 {
			t.Fatalf("%d requests for one %s: clientv3 retried", n, op)
		}
		if el > timeout {
			t.Errorf("%s returned after %v, beyond its %v context", op, el, timeout)
		}
	}

	t.Run("compare-and-swap", func(t *testing.T) {
		lose(t, "compare-and-swap", func(ctx context.Context) error {
			_, err := s.CompareAndSwap(ctx, "k", driver.NoVersion, []byte("mine"), ttl)
			return err
		})
		v, _, err := direct.Get(ctx, "k")
		if err != nil || string(v) != "mine" {
			t.Fatalf("etcd holds %q, %v: the write was not applied", v, err)
		}
	})
	t.Run("compare-and-delete", func(t *testing.T) {
		_, ver, err := direct.Get(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		lose(t, "compare-and-delete", func(ctx context.Context) error { return s.CompareAndDelete(ctx, "k", ver) })
		if _, _, err := direct.Get(ctx, "k"); !errors.Is(err, driver.ErrNotFound) {
			t.Fatalf("after the lost delete: %v, want the key gone", err)
		}
	})
}

// TestHungServerErrorsWithinContext: with the server hung (connections
// accepted, nothing answered) every call returns an error by its context's
// deadline.
func TestHungServerErrorsWithinContext(t *testing.T) {
	p := startProxy(t)
	s := proxiedStore(t, p, uniquePrefix(t))
	ctx := t.Context()
	if _, err := s.CompareAndSwap(ctx, "warm", driver.NoVersion, []byte("w"), time.Minute); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	const timeout = 300 * time.Millisecond
	const slack = 500 * time.Millisecond // a loaded 2-core machine under -race
	for op, call := range storeOps(s, "warm") {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		start := time.Now()
		err := call(cctx)
		el := time.Since(start)
		cancel()
		if err == nil || errors.Is(err, driver.ErrConflict) || errors.Is(err, driver.ErrNotFound) {
			t.Errorf("%s on a hung server: %v, want an error", op, err)
		}
		if el > timeout+slack {
			t.Errorf("%s on a hung server returned after %v, context %v", op, el, timeout)
		}
	}
	if st := p.Stats(); st.Blackholed == 0 {
		t.Fatalf("proxy %+v: nothing reached the blackhole", st)
	}
}

// TestFaultFleet runs a Breaker fleet over etcd through the fault proxy
// (lost and failed answers after apply, delays, resets, a hung server) and
// checks that no failure is counted twice, each probe election's winner
// probes, openings are reported, one probe per restraint, no transition
// reported twice, and every call returns within CallTimeout. Each worker
// has its own client, as a separate process would.
func TestFaultFleet(t *testing.T) {
	prefix := uniquePrefix(t)
	faultfleet.Proxied(t, strings.TrimPrefix(endpoints[0], "http://"), prefix, newStoreUnder(t, prefix), func(addr string) (driver.Store, error) {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + addr}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { cli.Close() })
		return etcd.New(cli)
	}, func() string { return fmt.Sprintf("etcd pid %d (0: stopped)", server.PID()) })
}

// sdkRetry is an etcd store behind a client that, like the AWS SDK, retries
// a write whose answer it did not get, and passes the retry's conflict up
// without recognising its own first write.
type sdkRetry struct{ driver.Store }

func (s sdkRetry) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	v, err := s.Store.CompareAndSwap(ctx, key, old, value, ttl)
	if err != nil && !errors.Is(err, driver.ErrConflict) && ctx.Err() == nil {
		v, err = s.Store.CompareAndSwap(ctx, key, old, value, ttl)
	}
	return v, err
}

// TestFaultFleetCatchesSDKRetry is TestFaultFleet's negative control over
// the same real server and proxy: with writes retried as an SDK would, the
// checks report the double-counted failures, probe winners told Hold or
// unreported openings that such retries cause.
func TestFaultFleetCatchesSDKRetry(t *testing.T) {
	// Which writes lose their answer depends on timing: a run may miss;
	// three runs (2 s each) that all miss fail the test.
	var err error
	for seed := int64(1); seed <= 3; seed++ {
		p := startProxy(t)
		prefix := uniquePrefix(t)
		observer := newStoreUnder(t, prefix)
		var rep faultfleet.Report
		rep, err = faultfleet.Run(t.Context(), faultfleet.Config{
			NewStore: func(ctx context.Context, _ int) (driver.Store, error) {
				return sdkRetry{proxiedStore(t, p, prefix)}, nil
			},
			Observer: observer,
			Proxy:    p,
			Faults:   faultfleet.FaultDrop,
			DropRate: 0.25,
			Short:    true,
			Seed:     seed,
		})
		t.Log(rep)
		if err != nil {
			break
		}
	}
	if !errors.Is(err, faultfleet.ErrViolation) {
		t.Fatalf("got %v, want violations", err)
	}
	if !strings.Contains(err.Error(), "counted twice") && !strings.Contains(err.Error(), "won the probe election") &&
		!strings.Contains(err.Error(), "opened the circuit") {
		t.Fatalf("violations do not name an own-write conflict:\n%v", err)
	}
	t.Logf("as expected:\n%v", err)
}
