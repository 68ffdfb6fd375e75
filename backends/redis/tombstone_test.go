package redis_test

import (
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestDeleteRerunAfterTombstone: a delete whose answer was lost, rerun
// (the same write id) after its tombstone's TTL (the record's remaining
// TTL) has ended, finds the key absent and reports driver.ErrNotFound,
// which a Breaker takes as the record gone, and leaves it absent; rerun
// after another worker wrote the key again, it conflicts with that record
// and leaves it as it is. Neither rerun brings back or deletes a record.
func TestDeleteRerunAfterTombstone(t *testing.T) {
	ctx := t.Context()
	s, err := redis.Dial(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	raw := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer raw.Close()
	key := "tombstone/" + t.Name()
	gone := func() {
		t.Helper()
		// The server's expiry, bounded in real time.
		for deadline := time.Now().Add(10 * time.Second); ; {
			n, err := raw.Exists(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the tombstone at %s outlived 10 s", key)
			}
			time.Sleep(10 * time.Millisecond) // polling the server's expiry, not waiting for our logic
		}
	}
	const ttl = 200 * time.Millisecond
	ver, err := s.CompareAndSwap(ctx, key, driver.NoVersion, []byte("r"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	const id = "rerun.of.the.delete"
	if err := s.CompareAndDeleteRun(ctx, key, ver, id); err != nil {
		t.Fatalf("the delete's first run = %v", err)
	}
	if d, err := raw.PTTL(ctx, key).Result(); err != nil || d <= 0 || d > ttl {
		t.Fatalf("the tombstone's TTL = %v, %v; want the record's remaining, within %v", d, err, ttl)
	}
	gone()
	if err := s.CompareAndDeleteRun(ctx, key, ver, id); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("the rerun after the tombstone expired = %v; want not found", err)
	}
	if n, err := raw.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Fatalf("after the rerun the key exists: %d, %v", n, err)
	}
	// Another worker writes the key again; the rerun names the deleted
	// version.
	nv, err := s.CompareAndSwap(ctx, key, driver.NoVersion, []byte("new"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if nv <= ver {
		t.Fatalf("the re-created record's version %d is not past the deleted %d", nv, ver)
	}
	err = s.CompareAndDeleteRun(ctx, key, ver, id)
	if ce, ok := errors.AsType[*driver.ConflictError](err); !ok || ce.Version != nv || string(ce.Value) != "new" {
		t.Fatalf("the rerun after a re-create = %v; want a conflict naming %d", err, nv)
	}
	if v, got, err := s.Get(ctx, key); err != nil || got != nv || string(v) != "new" {
		t.Fatalf("after the rerun Get = %q, %d, %v; want the new record", v, got, err)
	}
}
