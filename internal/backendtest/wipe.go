package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// Feed is a Follow running for a test, its changes buffered.
type Feed struct {
	ch   chan driver.Change
	done chan error
}

// Follow starts st.Follow(prefix) for the test's life; at the test's end it
// stops it and checks that it returned context.Canceled.
func Follow(t testing.TB, ctx context.Context, st driver.Follower, prefix string, heartbeat time.Duration) *Feed {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	f := &Feed{ch: make(chan driver.Change, 1<<16), done: make(chan error, 1)}
	go func() { f.done <- st.Follow(ctx, prefix, heartbeat, func(c driver.Change) { f.ch <- c }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-f.done; !errors.Is(err, context.Canceled) {
			t.Errorf("Follow returned %v, want context.Canceled", err)
		}
	})
	return f
}

// feedWait bounds each wait for a feed's change.
const feedWait = 20 * time.Second

// AwaitSyncedWith waits for a Synced that follows a Put of key (since the
// feed's last Reset).
func (f *Feed) AwaitSyncedWith(t testing.TB, key string) {
	t.Helper()
	deadline := time.After(feedWait)
	has := false
	for {
		select {
		case c := <-f.ch:
			switch c.Kind {
			case driver.ChangeReset, driver.ChangeLost:
				has = false
			case driver.ChangePut:
				has = has || c.Key == key
			case driver.ChangeDelete, driver.ChangeStale:
				has = has && c.Key != key
			case driver.ChangeSynced:
				if has {
					return
				}
			}
		case <-deadline:
			t.Fatalf("no Synced after a Put of %s within %v", key, feedWait)
		}
	}
}

// AwaitWipeSeen checks what a feed sends after key was removed behind the
// adapter's back, the removal having returned at wiped: a Lost, or a
// Delete or Stale of key, must come before any Synced whose At is after
// wiped (else a mirror would vouch, past the removal, for a record the
// store no longer has), and within 20 s. It returns how the feed saw it.
func (f *Feed) AwaitWipeSeen(t testing.TB, key string, wiped time.Time) driver.Change {
	t.Helper()
	deadline := time.After(feedWait)
	for {
		select {
		case c := <-f.ch:
			switch {
			case c.Kind == driver.ChangeLost, c.Key == key && (c.Kind == driver.ChangeDelete || c.Kind == driver.ChangeStale):
				return c
			case c.Kind == driver.ChangeSynced && c.At.After(wiped):
				t.Fatalf("Synced{At: %v after the removal} with %s still live in the feed", c.At.Sub(wiped), key)
			}
		case <-deadline:
			t.Fatalf("the removal of %s was not seen within %v", key, feedWait)
		}
	}
}

// FollowDemand starts st.FollowDemand(prefix) for the test's life, asking
// it for a beat every 5 ms (as a mirror asks on each call); at the test's
// end it stops it and checks that it returned context.Canceled.
func FollowDemand(t testing.TB, ctx context.Context, st driver.DemandFollower, prefix string, heartbeat time.Duration) *Feed {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	f := &Feed{ch: make(chan driver.Change, 1<<16), done: make(chan error, 1)}
	want := make(chan struct{}, 1)
	go Ask(ctx, want, 5*time.Millisecond)
	go func() {
		f.done <- st.FollowDemand(ctx, prefix, heartbeat, want, func(c driver.Change) { f.ch <- c })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-f.done; !errors.Is(err, context.Canceled) {
			t.Errorf("FollowDemand returned %v, want context.Canceled", err)
		}
	})
	return f
}

// Ask asks a feed on demand for a beat every interval, as a mirror asks on
// each call, until ctx ends: an ask the feed has not taken yet stands for
// the next (want holds one).
func Ask(ctx context.Context, want chan<- struct{}, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			select {
			case want <- struct{}{}:
			default:
			}
		}
	}
}
