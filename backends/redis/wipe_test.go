package redis_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// TestFollowSeesWipes: an operator empties or swaps the database with
// Redis's own commands on a connection of theirs (FLUSHDB, FLUSHALL,
// SWAPDB): the feed reports it (Lost, or a Stale of the key) before any
// Synced whose At is after it, so a mirror never vouches for a record the
// server no longer has.
func TestFollowSeesWipes(t *testing.T) {
	for name, wipe := range map[string][]any{
		"flushdb":  {"FLUSHDB"},
		"flushall": {"FLUSHALL"},
		"swapdb":   {"SWAPDB", 0, 1},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			server := redistest.MustStart(t) // a server of its own: the wipe takes every key
			st := newRaw(t, server.Addr())
			const key = "wiped/host.example"
			if _, err := st.CompareAndSwap(ctx, key, driver.NoVersion, []byte("record"), time.Hour); err != nil {
				t.Fatal(err)
			}
			f := backendtest.Follow(t, ctx, st, "wiped/", 100*time.Millisecond)
			f.AwaitSyncedWith(t, key)
			if err := goredis.NewClient(&goredis.Options{Addr: server.Addr()}).Do(ctx, wipe...).Err(); err != nil {
				t.Fatalf("%v: %v", wipe, err)
			}
			c := f.AwaitWipeSeen(t, key, time.Now())
			t.Logf("seen as %v (%v)", c.Kind, c.Err)
		})
	}
}
