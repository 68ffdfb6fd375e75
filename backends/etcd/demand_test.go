package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

// TestFollowDemand: a feed on demand, asked now and then, delivers each
// write that returned before a Synced's At before that Synced, as
// driver.Follower promises; not asked, it delivers no Synced after its
// snapshot's.
func TestFollowDemand(t *testing.T) {
	cli, st := newClientStore(t)
	prefix := uniquePrefix(t)
	got := make(chan driver.Change, 1<<10)
	want := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- st.FollowDemand(ctx, prefix, followHeartbeat, want, func(c driver.Change) { got <- c })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("FollowDemand returned %v", err)
		}
	})
	next := func(what string) driver.Change {
		t.Helper()
		select {
		case c := <-got:
			if c.Kind == driver.ChangeLost {
				t.Fatalf("Lost (%v) while waiting for %s", c.Err, what)
			}
			return c
		case <-time.After(feedWait):
			t.Fatalf("no %s within %v", what, feedWait)
		}
		return driver.Change{}
	}
	for c := next("the snapshot's Synced"); c.Kind != driver.ChangeSynced; c = next("the snapshot's Synced") {
	}
	// Not asked: nothing but what a write pushes.
	quiet := time.NewTimer(5 * followHeartbeat)
	select {
	case c := <-got:
		t.Fatalf("a feed not asked delivered %v", c.Kind)
	case <-quiet.C:
	}
	go backendtest.Ask(ctx, want, 10*time.Millisecond)
	for i := range 5 {
		key := fmt.Sprintf("%sk%d", prefix, i)
		if _, err := cli.Put(t.Context(), key, "v"); err != nil {
			t.Fatal(err)
		}
		returned := time.Now()
		seen := false
	wait:
		for {
			select {
			case c := <-got:
				switch {
				case c.Kind == driver.ChangeLost:
					t.Fatalf("Lost: %v", c.Err)
				case c.Kind == driver.ChangePut && c.Key == key:
					seen = true
				case c.Kind == driver.ChangeSynced && c.At.After(returned):
					if !seen {
						t.Fatalf("Synced{At: %v} after %s returned at %v, before its Put", c.At, key, returned)
					}
				}
				if seen && c.Kind == driver.ChangeSynced && c.At.After(returned) {
					break wait
				}
			case <-time.After(feedWait):
				t.Fatalf("no Synced after write %d within %v", i, feedWait)
			}
		}
	}
}
