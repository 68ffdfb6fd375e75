package sqlite_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/sqlite"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/mirrortest"
)

// TestMirrorFleet: eight Breakers with a mirror, each over a Store of its
// own on one file (its own connections, as a separate process has), under
// one prefix. A circuit one opens reaches every other within twice the p99
// feed delay measured in the run (a poll interval, by design); then a
// purge of changes no follower has read is recorded in the file (the
// conformance harness's BreakFeed), which every follower must report as
// lost, and while their feeds are down one Breaker opens a second circuit:
// every Breaker decides from the store meanwhile, and from the mirror
// again once resynchronised, always as the store says.
func TestMirrorFleet(t *testing.T) {
	path := tempDB(t)
	prefix := uniquePrefix(t)
	var stores []driver.Store
	var broken []int
	for i := range 8 {
		stores = append(stores, isolate(t, open(t, path), prefix))
		broken = append(broken, i)
	}
	f := mirrortest.Start(t, stores, kvbreaker.Settings{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: time.Hour})
	f.Propagate(t, 0, "open.example", 16)
	h, err := harnessAt(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	t.Log(f.BreakAndChange(t, mirrortest.Break{Host: "meanwhile.example", Writer: 0, Broken: broken, Do: h.BreakFeed}))
}

// TestFollowDelay logs the feed's delay: from a compare-and-swap's return,
// in a Store of its own (another process's connections), to its Put's
// delivery by Follow at the default poll interval, over writes of distinct
// keys paced every 7 ms, a period unrelated to the poll's, so that the
// writes fall at every phase of it (a measurement; nothing is asserted
// about it).
func TestFollowDelay(t *testing.T) {
	writes := 300
	if testing.Short() {
		writes = 60
	}
	path := tempDB(t)
	follower, writer := open(t, path), open(t, path)
	prefix := uniquePrefix(t)

	var mu sync.Mutex
	arrived := map[string]time.Time{}
	synced := make(chan struct{}, 1)
	all := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- follower.Follow(ctx, prefix, time.Second, func(c driver.Change) {
			now := time.Now()
			switch c.Kind {
			case driver.ChangeSynced:
				select {
				case synced <- struct{}{}:
				default:
				}
			case driver.ChangePut:
				mu.Lock()
				if _, ok := arrived[c.Key]; !ok {
					arrived[c.Key] = now
					if len(arrived) == writes {
						close(all)
					}
				}
				mu.Unlock()
			case driver.ChangeLost:
				t.Errorf("feed lost: %v", c.Err)
			}
		})
	}()
	defer func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Follow returned %v after its context was cancelled", err)
		}
	}()
	select {
	case <-synced:
	case <-time.After(20 * time.Second):
		t.Fatal("no Synced within 20 s")
	}

	returned := make(map[string]time.Time, writes)
	tick := time.NewTicker(7 * time.Millisecond)
	defer tick.Stop()
	for i := range writes {
		<-tick.C
		key := prefix + strconv.Itoa(i)
		if _, err := writer.CompareAndSwap(t.Context(), key, driver.NoVersion, []byte("v"), time.Hour); err != nil {
			t.Fatal(err)
		}
		returned[key] = time.Now()
	}
	select {
	case <-all:
	case <-time.After(20 * time.Second):
		t.Fatal("not every write delivered within 20 s")
	}
	mu.Lock()
	delays := make([]time.Duration, 0, writes)
	for k, r := range returned {
		delays = append(delays, arrived[k].Sub(r))
	}
	mu.Unlock()
	slices.Sort(delays)
	t.Logf("feed delay over %d writes (compare-and-swap returned in another Store → Put delivered, poll every %v): p50 %v, p99 %v, max %v",
		writes, sqlite.DefaultFollowPoll, delays[len(delays)/2], delays[len(delays)*99/100], delays[len(delays)-1])
}
