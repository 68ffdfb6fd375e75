package nats_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kvbreaker/kvbreaker"
	kvnats "github.com/kvbreaker/kvbreaker/backends/nats"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/fleettest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/natstest"
)

func noLeaks(t *testing.T) {
	// Registered first, so it runs last: after the stores, connections
	// and servers are closed. The shared server's goroutines predate it.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// storeOps is one call of each Store operation on s.
func storeOps(s *kvnats.Store, key string) map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		"get": func(ctx context.Context) error { _, _, err := s.Get(ctx, key); return err },
		"compare-and-swap": func(ctx context.Context) error {
			_, err := s.CompareAndSwap(ctx, "new-"+key, driver.NoVersion, []byte("v"), time.Minute)
			return err
		},
		"compare-and-delete": func(ctx context.Context) error { return s.CompareAndDelete(ctx, key, 1) },
		"list":               func(ctx context.Context) error { _, _, err := s.List(ctx, key, "", 10); return err },
	}
}

// TestServerKillPauseRestart kills the server in the middle of a run:
// every call fails within its deadline naming the server, the Breaker
// fails open (or closed, when so configured); a paused server likewise;
// after a restart on the same port and storage everything works again,
// with the records written before still there, and a Follow that lost its
// feed resynchronises. No goroutine outlives the test.
func TestServerKillPauseRestart(t *testing.T) {
	noLeaks(t)
	srv := natstest.MustStart(t)
	ctx := t.Context()
	const callTimeout = 400 * time.Millisecond
	const slack = 2 * time.Second // scheduling on a loaded 2-core machine
	store, err := kvnats.Dial(ctx, srv.URL(), "faults", nil)
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
	for range 2 {
		if err := open.Failure(ctx, "down.example"); err != nil {
			t.Fatal(err)
		}
	}
	tr.Want(t, map[string]int{"closed→open": 1})

	fctx, stopFollow := context.WithCancel(ctx)
	changes := make(chan driver.Change, 1024)
	followed := make(chan error, 1)
	go func() {
		followed <- store.Follow(fctx, "", 50*time.Millisecond, func(c driver.Change) { changes <- c })
	}()
	awaitKind(t, changes, driver.ChangeSynced)

	down := func(t *testing.T, how string) {
		for op, call := range storeOps(store, "down.example") {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			start := time.Now()
			err := call(cctx)
			took := time.Since(start)
			cancel()
			if err == nil || errors.Is(err, driver.ErrConflict) || errors.Is(err, driver.ErrNotFound) {
				t.Errorf("%s with the server %s: %v, want a transport error", op, how, err)
				continue
			}
			if took > callTimeout+slack {
				t.Errorf("%s took %v with the server %s", op, took, how)
			}
			if want := "nats: " + op; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("%s error %q: want %q…", op, err, want)
			}
		}
		v, err := open.Allow(ctx, "fine.example", time.Time{})
		if err == nil || v.Decision != kvbreaker.Send {
			t.Errorf("Allow with the server %s = %v, %v; want send and an error", how, v.Decision, err)
		}
		v, err = closed.Allow(ctx, "fine.example", time.Time{})
		if err == nil || v.Decision != kvbreaker.Hold {
			t.Errorf("FailClosed Allow with the server %s = %v, %v; want hold and an error", how, v.Decision, err)
		}
	}

	t.Run("paused", func(t *testing.T) {
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		down(t, "paused")
		if err := srv.Resume(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("killed", func(t *testing.T) {
		srv.Kill()
		awaitKind(t, changes, driver.ChangeLost)
		down(t, "killed")
	})
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Run("restarted", func(t *testing.T) {
		// The connection reconnects on its own: the next call waits for
		// it within its context.
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		v, err := open.Allow(rctx, "down.example", time.Time{})
		if err != nil || v.Decision != kvbreaker.Hold {
			t.Errorf("Allow on the open host after the restart = %v, %v; want hold (the record survived)", v.Decision, err)
		}
		awaitKind(t, changes, driver.ChangeReset)
		awaitKind(t, changes, driver.ChangeSynced)
		if _, err := store.CompareAndSwap(ctx, "new.example", driver.NoVersion, []byte("v"), time.Minute); err != nil {
			t.Errorf("write after the restart: %v", err)
		}
	})
	stopFollow()
	if err := <-followed; !errors.Is(err, context.Canceled) {
		t.Errorf("Follow returned %v, want context.Canceled", err)
	}
	store.Close()
	srv.Close()
}

// awaitKind waits (bounded) for a change of kind.
func awaitKind(t testing.TB, ch <-chan driver.Change, kind driver.ChangeKind) driver.Change {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case c := <-ch:
			if c.Kind == kind {
				return c
			}
		case <-deadline:
			t.Fatalf("no %v within 20 s", kind)
		}
	}
}
