package backendtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

// scripted is a run of changes a fake feed sends.
type scripted []driver.Change

var (
	put    = driver.Change{Kind: driver.ChangePut, Key: "k", Value: []byte("v"), Version: 1}
	synced = driver.Change{Kind: driver.ChangeSynced}
)

// TestAwaitWipeSeen: a feed that goes on vouching for a removed key
// fails the check (the negative control); one that reports Lost, or a
// Delete of the key, passes.
func TestAwaitWipeSeen(t *testing.T) {
	for name, after := range map[string][]driver.Change{
		"lost":   {{Kind: driver.ChangeLost}, synced},
		"delete": {{Kind: driver.ChangeDelete, Key: "k"}, synced},
		"stale":  {{Kind: driver.ChangeStale, Key: "k"}, synced},
	} {
		t.Run(name, func(t *testing.T) {
			wiped := make(chan time.Time, 1)
			f := backendtest.Follow(t, t.Context(), wipeFeed(wiped, after), "", time.Second)
			f.AwaitSyncedWith(t, "k")
			f.AwaitWipeSeen(t, "k", <-wiped)
		})
	}
	t.Run("ignored", func(t *testing.T) {
		msg := failure(t, func(tb testing.TB) {
			wiped := make(chan time.Time, 1)
			f := backendtest.Follow(tb, t.Context(), wipeFeed(wiped, []driver.Change{{Kind: driver.ChangePut, Key: "other"}, synced}), "", time.Second)
			f.AwaitSyncedWith(tb, "k")
			f.AwaitWipeSeen(tb, "k", <-wiped)
		})
		if !strings.Contains(msg, "still live") {
			t.Fatalf("a feed that ignored the removal passed the check (failure %q)", msg)
		}
	})
}

// wipeFeed sends Reset, a Put of k and Synced, notes the instant of a
// removal on wiped, then sends after.
func wipeFeed(wiped chan<- time.Time, after []driver.Change) driver.Follower {
	return followFunc(func(ctx context.Context, fn func(driver.Change)) error {
		scripted{{Kind: driver.ChangeReset}, put, synced}.send(fn, time.Now())
		at := time.Now()
		wiped <- at
		scripted(after).send(fn, at.Add(time.Millisecond))
		<-ctx.Done()
		return ctx.Err()
	})
}

// send sends the changes, each Synced At at.
func (s scripted) send(fn func(driver.Change), at time.Time) {
	for _, c := range s {
		if c.Kind == driver.ChangeSynced {
			c.At = at
		}
		fn(c)
	}
}

type followFunc func(ctx context.Context, fn func(driver.Change)) error

func (f followFunc) Follow(ctx context.Context, _ string, _ time.Duration, fn func(driver.Change)) error {
	return f(ctx, fn)
}
