package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// TestStoreCallsUnreachable: every call of a Store whose server was killed
// (its port now refuses connections) fails with an *driver.UnreachableError
// naming the server's address and the refusal, matching driver.ErrUnreachable, as
// Dial's does and driver's doc promises.
func TestStoreCallsUnreachable(t *testing.T) {
	srv := redistest.MustStart(t)
	addr := srv.Addr()
	// A pool larger than the refused dials below: go-redis starts a
	// background redial, which outlives Close by up to a second, once a
	// pool's size of dials have failed.
	s, err := redis.Dial(t.Context(), "redis://"+addr+"/0?pool_size=200&max_retries=-1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ver, err := s.CompareAndSwap(t.Context(), "k", driver.NoVersion, []byte("v"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	calls := map[string]func(ctx context.Context) error{
		"get": func(ctx context.Context) error { _, _, err := s.Get(ctx, "k"); return err },
		"compare-and-swap": func(ctx context.Context) error {
			_, err := s.CompareAndSwap(ctx, "k", ver, []byte("w"), time.Minute)
			return err
		},
		"compare-and-delete": func(ctx context.Context) error { return s.CompareAndDelete(ctx, "k", ver) },
		"list":               func(ctx context.Context) error { _, _, err := s.List(ctx, "", "", 10); return err },
		"expiry":             func(ctx context.Context) error { _, err := s.Expiry(ctx, "k"); return err },
	}
	for op, call := range calls {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		err := call(ctx)
		cancel()
		ue, ok := errors.AsType[*driver.UnreachableError](err)
		if !ok || !errors.Is(err, driver.ErrUnreachable) || len(ue.Endpoints) != 1 || ue.Endpoints[0] != addr {
			t.Errorf("%s on a killed server = %v; want an *driver.UnreachableError naming %s", op, err, addr)
			continue
		}
		if want := "redis: " + op; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
			t.Errorf("%s: %q does not start with %q", op, err, want)
		}
		if want := "cannot reach redis at " + addr + ": connection refused"; ue.Error() != want {
			t.Errorf("%s: cause %q, want %q", op, ue, want)
		}
	}
}
