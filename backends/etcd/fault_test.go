package etcd_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/fleettest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/etcdtest"
)

// TestServerStopAndRestart kills etcd in the middle of a run: every call
// fails within its deadline with an error naming the endpoint, the Breaker
// fails open (or closed, when so configured) and returns the error, and
// after a restart on the same ports and data everything works again, with
// the records written before the stop still there. No goroutine outlives
// the test.
func TestServerStopAndRestart(t *testing.T) {
	// Registered first, so it runs last: after the stores, clients and the
	// server below are closed. The shared server's goroutines predate it.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })

	// The server runs in a child process, so a stop is a real process
	// exit and the leak check sees only this process's goroutines: the
	// client's and the store's.
	srv := etcdtest.MustStart(t)
	ctx := t.Context()
	const callTimeout = 400 * time.Millisecond
	const slack = time.Second // scheduling on a loaded 2-core machine
	store, err := etcd.Dial(ctx, srv.Endpoints())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clock := fleettest.NewClock()
	tr := &fleettest.Transitions{}
	settings := kvbreaker.Settings{
		FailureThreshold: 2, RecoveryDelay: time.Minute, FailureWindow: time.Minute,
		CallTimeout: callTimeout, Clock: clock.Now, OnStateChange: tr.Record,
	}
	open, err := kvbreaker.New(store, settings)
	if err != nil {
		t.Fatal(err)
	}
	settings.FailClosed = true
	closed, err := kvbreaker.New(store, settings)
	if err != nil {
		t.Fatal(err)
	}
	// The set-up's writes go through a Breaker of their own, without the
	// short CallTimeout under test: on a loaded machine a healthy etcd can
	// answer later than 400 ms, and a Failure cut off by its deadline may
	// still have counted, so it cannot be retried.
	settings.FailClosed, settings.CallTimeout = false, time.Minute
	setup, err := kvbreaker.New(store, settings)
	if err != nil {
		t.Fatal(err)
	}

	// Before the fault: one host open, one with a failure counted.
	for range 2 {
		if err := setup.Failure(ctx, "down.example"); err != nil {
			t.Fatal(err)
		}
	}
	if err := setup.Failure(ctx, "flaky.example"); err != nil {
		t.Fatal(err)
	}
	tr.Want(t, map[string]int{"closed→open": 1})

	srv.Kill() // as a crash: SIGKILL

	t.Run("store-calls-fail-within-deadline", func(t *testing.T) {
		for op, call := range storeOps(store, "down.example") {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			err := within(t, callTimeout+slack, op, func() error { return call(cctx) })
			cancel()
			if err == nil || errors.Is(err, driver.ErrConflict) || errors.Is(err, driver.ErrNotFound) {
				t.Errorf("%s with etcd stopped: %v, want a transport error", op, err)
				continue
			}
			if want := "etcd: " + op; !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), srv.Endpoints()[0]) {
				t.Errorf("%s error %q: want %q… naming %s", op, err, want, srv.Endpoints()[0])
			}
		}
	})

	t.Run("breaker-fails-open", func(t *testing.T) {
		for _, host := range []string{"down.example", "fine.example"} {
			v, err := within(t, callTimeout+slack, "Allow", func() allowResult {
				v, err := open.Allow(ctx, host, time.Time{})
				return allowResult{v, err}
			}).get()
			if err == nil || v.Decision != kvbreaker.Send {
				t.Errorf("Allow(%s) with etcd stopped = %v, %v; want send and an error", host, v.Decision, err)
			}
			if !strings.Contains(err.Error(), "etcd: get") {
				t.Errorf("Allow's error %q does not carry the store's", err)
			}
		}
		err := within(t, callTimeout+slack, "Failure", func() error { return open.Failure(ctx, "flaky.example") })
		if err == nil {
			t.Error("Failure with etcd stopped returned no error")
		}
	})

	t.Run("breaker-fails-closed-when-configured", func(t *testing.T) {
		v, err := within(t, callTimeout+slack, "Allow", func() allowResult {
			v, err := closed.Allow(ctx, "fine.example", time.Time{})
			return allowResult{v, err}
		}).get()
		if err == nil || v.Decision != kvbreaker.Hold || !v.RetryAt.Equal(clock.Now().Add((kvbreaker.Settings{}).WithDefaults().ReleaseInterval)) {
			t.Errorf("FailClosed Allow with etcd stopped = %+v, %v; want hold for the release interval and an error", v, err)
		}
	})
	tr.Want(t, map[string]int{})

	if err := srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The client reconnects on its own; wait (bounded) for the first
	// answer.
	deadline := time.Now().Add(15 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, _, err := store.Get(cctx, "down.example")
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("store still failing 15 s after the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // waiting for a real reconnection
	}

	t.Run("works-after-restart", func(t *testing.T) {
		// The open record survived the restart.
		v, err := open.Allow(ctx, "down.example", time.Time{})
		if err != nil || v.Decision != kvbreaker.Hold {
			t.Errorf("Allow on the open host after restart = %v, %v; want hold", v.Decision, err)
		}
		// The failure counted before the stop still counts: one more opens.
		if err := open.Failure(ctx, "flaky.example"); err != nil {
			t.Fatal(err)
		}
		tr.Want(t, map[string]int{"closed→open": 1})
		clock.Advance(time.Minute + time.Second)
		v, err = closed.Allow(ctx, "down.example", time.Time{})
		if err != nil || v.Decision != kvbreaker.Probe {
			t.Fatalf("Allow after the recovery delay = %v, %v; want probe", v.Decision, err)
		}
		if err := closed.Success(ctx, "down.example"); err != nil {
			t.Fatal(err)
		}
		tr.Want(t, map[string]int{"open→half-open": 1, "half-open→closed": 1})
		// New records get leases: the pool's cached lease survived too.
		if _, err := store.CompareAndSwap(ctx, "new.example", driver.NoVersion, []byte("v"), time.Minute); err != nil {
			t.Errorf("write after restart: %v", err)
		}
	})

	store.Close()
	srv.Close()
}

type allowResult struct {
	v   kvbreaker.Verdict
	err error
}

func (r allowResult) get() (kvbreaker.Verdict, error) { return r.v, r.err }

// TestLostLeaseIsRegranted: when the server no longer knows the pooled
// lease (revoked by an operator, or lost with the data), the write grants a
// new one instead of failing.
func TestLostLeaseIsRegranted(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	mustCAS(t, s, "a", driver.NoVersion, "v", longTTL)
	resp, err := s.Client().Get(ctx, s.prefix+"a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	before := s.Stats().Grants
	mustCAS(t, s, "b", driver.NoVersion, "v", longTTL)
	if got := s.Stats().Grants - before; got != 1 {
		t.Errorf("write after the pooled lease was revoked made %d grants, want 1", got)
	}
	if got := leaseTTL(t, s, "b"); got != 63 {
		t.Errorf("new lease granted for %d s, want 63", got)
	}
}

// storeOps is one call of each Store operation on s: a get and a delete of
// key, a create of another key, and a list from key if s lists.
func storeOps(s driver.Store, key string) map[string]func(context.Context) error {
	ops := map[string]func(context.Context) error{
		"get": func(ctx context.Context) error { _, _, err := s.Get(ctx, key); return err },
		"compare-and-swap": func(ctx context.Context) error {
			_, err := s.CompareAndSwap(ctx, "new-"+key, driver.NoVersion, []byte("v"), time.Minute)
			return err
		},
		"compare-and-delete": func(ctx context.Context) error { return s.CompareAndDelete(ctx, key, 1) },
	}
	if l, ok := s.(driver.Lister); ok {
		ops["list"] = func(ctx context.Context) error { _, _, err := l.List(ctx, key, "", 10); return err }
	}
	return ops
}
