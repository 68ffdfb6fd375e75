package redis_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
	"github.com/kvbreaker/kvbreaker/internal/wipetest"
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

// TestMarkersAreNotRecords: followers of the whole database (a Breaker
// without Prefixed) each keep a marker key there and refresh it every
// beat; another follower delivers nothing of it and List leaves it out,
// so a mirror holds no host named after it and `kvbreaker list` shows none.
func TestMarkersAreNotRecords(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	server := redistest.MustStart(t) // a database of its own: the prefix is every key
	st := newRaw(t, server.Addr())
	const key, later = "host.example", "later.example"
	if _, err := st.CompareAndSwap(ctx, key, driver.NoVersion, []byte("record"), time.Hour); err != nil {
		t.Fatal(err)
	}
	fctx, stop := context.WithCancel(ctx)
	changes := make([]chan driver.Change, 2)
	done := make(chan error, 2)
	for i := range changes {
		ch := make(chan driver.Change, 1<<14)
		changes[i] = ch
		go func() {
			done <- newRaw(t, server.Addr()).Follow(fctx, "", 50*time.Millisecond, func(c driver.Change) { ch <- c })
		}()
	}
	defer func() {
		stop()
		for range changes {
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("Follow returned %v", err)
			}
		}
	}()
	// seen waits for n Synced (after a Stale or Put of want, if set) and
	// fails on any change of a key that is no record.
	seen := func(ch chan driver.Change, n int, want string) {
		t.Helper()
		has := want == ""
		for n > 0 {
			select {
			case c := <-ch:
				switch {
				case c.Kind == driver.ChangeLost:
					t.Fatalf("Lost: %v", c.Err)
				case c.Key != "" && c.Key != key && c.Key != later:
					t.Fatalf("the feed delivered %v of %q, not a record", c.Kind, c.Key)
				case c.Kind == driver.ChangeSynced:
					if has {
						n--
					}
				case c.Key == want:
					has = true
				}
			case <-ctx.Done():
				t.Fatal("no Synced in time")
			}
		}
	}
	// Several beats of both, each refreshing its marker, then a write:
	// its Stale comes after every change made before it.
	for _, ch := range changes {
		seen(ch, 6, "")
	}
	markers, err := goredis.NewClient(&goredis.Options{Addr: server.Addr()}).Keys(ctx, "kvbreaker:follow:*").Result()
	if err != nil || len(markers) != 2 {
		t.Fatalf("markers %v (%v): want one per follower", markers, err)
	}
	if _, err := st.CompareAndSwap(ctx, later, driver.NoVersion, []byte("record"), time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, ch := range changes {
		seen(ch, 1, later)
	}
	keys, _, err := st.List(ctx, "", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{key, later}) {
		t.Errorf("List returned %q, want the two records", keys)
	}
}

// TestFollowWipeBlind: follow-wipe's negative control on the real server: the
// same harness, its feeds blind to what FLUSHDB, FLUSHALL and SWAPDB make
// them say, fails the case.
func TestFollowWipeBlind(t *testing.T) {
	h, err := newHarness(t.Context(), t)
	if err != nil {
		t.Fatal(err)
	}
	wipetest.CheckBlindFails(t, wiper{dropper{h.(*harness)}})
}

// TestFollowDemandSeesSwaps: two feeds on demand, sharing the fleet's
// beats, see every SWAPDB before any Synced whose At is after it. A swap
// sends no invalidation, so only a check of a feed's marker finds it: a
// beat that vouched without a check before it would let a mirror hold
// the other database's records as this one's. Both databases hold the
// key, so that each feed is current with it again after each swap; eight
// swaps, landing 0 to 3 heartbeats after both feeds are current.
func TestFollowDemandSeesSwaps(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	server := redistest.MustStart(t) // a server of its own: the swap takes every key
	admin := goredis.NewClient(&goredis.Options{Addr: server.Addr()})
	t.Cleanup(func() { admin.Close() })
	const key = "wiped/host.example"
	for db := range 2 {
		st := newRaw(t, server.Addr(), func(o *goredis.Options) { o.DB = db })
		if _, err := st.CompareAndSwap(ctx, key, driver.NoVersion, []byte("record"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	var feeds []*backendtest.Feed
	for range 2 {
		feeds = append(feeds, backendtest.FollowDemand(t, ctx, newRaw(t, server.Addr()), "wiped/", 100*time.Millisecond))
	}
	for i := range 8 {
		for _, f := range feeds {
			f.AwaitSyncedWith(t, key)
		}
		time.Sleep(time.Duration(i%4) * 100 * time.Millisecond) // where the swap lands between beats
		if err := admin.Do(ctx, "SWAPDB", 0, 1).Err(); err != nil {
			t.Fatal(err)
		}
		swapped := time.Now()
		for j, f := range feeds {
			c := f.AwaitWipeSeen(t, key, swapped)
			t.Logf("swap %d, feed %d: seen as %v (%v)", i, j, c.Kind, c.Err)
		}
	}
}
