package redis_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// TestNoReplicasTyped: a primary whose min-replicas-to-write it cannot
// meet (no replica at all) refuses every write with NOREPLICAS; each write
// (a create, a swap, a delete) fails with a *NoReplicasError matching
// ErrNoReplicas and not ErrNotReplicated, saying it was not applied, and
// indeed the key is as it was, also with WithWaitReplicas.
func TestNoReplicasTyped(t *testing.T) {
	srv := redistest.MustStart(t)
	ctx := t.Context()
	admin := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer admin.Close()
	for _, wait := range []bool{false, true} {
		var opts []redis.Option
		if wait {
			opts = append(opts, redis.WithWaitReplicas(1, 50*time.Millisecond))
		}
		c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
		defer c.Close()
		s, err := redis.New(c, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if err := admin.ConfigSet(ctx, "min-replicas-to-write", "0").Err(); err != nil {
			t.Fatal(err)
		}
		key := "noreplicas/" + map[bool]string{false: "plain", true: "wait"}[wait]
		// With WAIT and no replica the create is applied and reported as
		// not replicated; without, it succeeds.
		ver, err := s.CompareAndSwap(ctx, key, driver.NoVersion, []byte("before"), time.Minute)
		if wait && errors.Is(err, redis.ErrNotReplicated) {
			_, ver, err = s.Get(ctx, key)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := admin.ConfigSet(ctx, "min-replicas-to-write", "1").Err(); err != nil {
			t.Fatal(err)
		}
		for name, write := range map[string]func() error{
			"create": func() error {
				_, err := s.CompareAndSwap(ctx, key+"/absent", driver.NoVersion, []byte("x"), time.Minute)
				return err
			},
			"swap": func() error {
				_, err := s.CompareAndSwap(ctx, key, ver, []byte("after"), time.Minute)
				return err
			},
			"delete": func() error { return s.CompareAndDelete(ctx, key, ver) },
		} {
			err := write()
			nr, ok := errors.AsType[*redis.NoReplicasError](err)
			if !ok || !errors.Is(err, redis.ErrNoReplicas) || errors.Is(err, redis.ErrNotReplicated) || !goredis.HasErrorPrefix(nr.Err, "NOREPLICAS") {
				t.Fatalf("wait %v: %s refused for want of replicas = %v; want a *NoReplicasError", wait, name, err)
			}
			if want := "not applied"; !strings.Contains(err.Error(), want) {
				t.Errorf("wait %v: %s: %q does not say %q", wait, name, err, want)
			}
		}
		if v, got, err := s.Get(ctx, key); err != nil || got != ver || string(v) != "before" {
			t.Fatalf("wait %v: after the refused writes Get = %q, %d, %v; want \"before\", %d", wait, v, got, err, ver)
		}
		if _, _, err := s.Get(ctx, key+"/absent"); !errors.Is(err, driver.ErrNotFound) {
			t.Fatalf("wait %v: the refused create's key: Get = %v; want not found", wait, err)
		}
	}
}
