package redis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// TestFollowRefusedEnds: a feed whose every session the server refuses
// after its Reset (the ACL user may not read a key under the prefix, so
// each snapshot fails with NOPERM) ends with an error saying why, after a
// Lost for each refused session, rather than retrying until its context
// ends.
func TestFollowRefusedEnds(t *testing.T) {
	srv := redistest.MustStartWith(t, redistest.Options{Users: []string{aclUser}})
	admin := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer admin.Close()
	// A key the user may not read, under the prefix it follows.
	if err := admin.HSet(t.Context(), "fleet-b/x", "v", "other fleet").Err(); err != nil {
		t.Fatal(err)
	}
	s, err := redis.Dial(t.Context(), "redis://fleet-a:fleet-a-password@"+srv.Addr()+"/0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Bounded well beyond the retries' pauses (10+20+40+80 ms) and
	// calls, so that a feed that does not end fails the test here.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	fd := newFeed()
	err = s.Follow(ctx, "fleet-b/", 200*time.Millisecond, fd.fn)
	if ctx.Err() != nil || err == nil {
		t.Fatalf("Follow under a permanent NOPERM = %v, context %v; want it to end on its own", err, ctx.Err())
	}
	for _, want := range []string{"NOPERM", "sessions of the feed in a row", "&__redis__:invalidate", "docs/security.md"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Follow's error %q does not say %q", err, want)
		}
	}
	lost := 0
	for _, c := range fd.snapshot() {
		if c.Kind == driver.ChangeSynced {
			t.Errorf("Synced although refused: %s", describe(fd.snapshot()))
		}
		if c.Kind == driver.ChangeLost {
			if !strings.Contains(errString(c.Err), "NOPERM") {
				t.Errorf("Lost %v; want NOPERM", c.Err)
			}
			lost++
		}
	}
	if lost < 2 {
		t.Errorf("%d Lost before the end; want one per refused session, more than one", lost)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Errorf("Follow's error %v is a context's", err)
	}
}
