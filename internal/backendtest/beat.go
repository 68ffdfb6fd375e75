package backendtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// DemandStore is a store whose feeds beat on demand, for the fleet.
type DemandStore interface {
	driver.Store
	driver.DemandFollower
}

// DemandFleet is n feeds on demand over one prefix, each over a store of
// its own, asked for a beat in turn, one each millisecond, for Intervals
// heartbeats: the fleet-beat test of a backend whose beat serves every
// follower of the prefix (etcd, NATS).
type DemandFleet struct {
	// Open returns a store over a client of its own, closed when t ends.
	Open         func(t *testing.T) DemandStore
	Prefix       string
	N, Intervals int
	Heartbeat    time.Duration
	// FirstWait bounds the wait for each feed's first Synced.
	FirstWait time.Duration
	// Count reads the server's count of what the fleet wrote (nothing
	// else writes: the beats).
	Count func() int
	// CountAfterReturn reads the count's end once every feed has
	// returned, so that a beat under way as the run ends is in it or not
	// before the feed that sends it returns; otherwise as the asking
	// stops.
	CountAfterReturn bool
}

// Run runs the fleet and returns the count's growth from the first ask and
// each feed's Synced after its snapshot's. A Lost fails the test.
func (d DemandFleet) Run(t *testing.T) (counted int, synced []int) {
	t.Helper()
	n := d.N
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	synced = make([]int, n)
	lost := make(chan error, n)
	first := make(chan struct{}, n)
	wants := make([]chan struct{}, n)
	done := make(chan error, n)
	for i := range n {
		st := d.Open(t)
		wants[i] = make(chan struct{}, 1)
		seen := 0
		go func() {
			done <- st.FollowDemand(ctx, d.Prefix, d.Heartbeat, wants[i], func(c driver.Change) {
				switch c.Kind {
				case driver.ChangeSynced:
					if seen++; seen == 1 {
						first <- struct{}{}
						return
					}
					mu.Lock()
					synced[i]++
					mu.Unlock()
				case driver.ChangeLost:
					select {
					case lost <- c.Err:
					default:
					}
				}
			})
		}()
	}
	for range n {
		select {
		case <-first:
		case <-time.After(d.FirstWait):
			t.Fatalf("a feed delivered no first Synced in %v", d.FirstWait)
		}
	}
	before := d.Count()
	// One feed asked each millisecond, in turn: the processes' calls come
	// at times of their own.
	ask := time.NewTicker(time.Millisecond)
	end := time.NewTimer(time.Duration(d.Intervals) * d.Heartbeat)
	turn := 0
loop:
	for {
		select {
		case <-ask.C:
			turn++
			select {
			case wants[turn%n] <- struct{}{}:
			default:
			}
		case err := <-lost:
			t.Fatalf("Lost: %v", err)
		case <-end.C:
			break loop
		}
	}
	ask.Stop()
	if !d.CountAfterReturn {
		counted = d.Count() - before
	}
	cancel()
	for range n {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("FollowDemand returned %v", err)
		}
	}
	if d.CountAfterReturn {
		counted = d.Count() - before
	}
	mu.Lock()
	defer mu.Unlock()
	return counted, append([]int(nil), synced...)
}

// BeatDating is the dating test of a feed that takes its Synced from
// another feed's beats (TestFollowDemandBeatDated): each Synced dated no
// later than its arrival, and never after a write that had not reached the
// feed. Its negative controls date every beat 300 ms late (a sender's
// clock fast, or the server's stepped): the feed drops those that would
// date after their arrival; with the arrival check off as well, it vouches
// for writes it has not received, and the checks catch it.
type BeatDating struct {
	// Open returns a store over a client of its own, closed when t ends.
	Open      func(t *testing.T) DemandStore
	Prefix    func(t *testing.T) string
	Heartbeat time.Duration
	// Skew dates every beat d late until t ends; with deliver, the feed
	// also delivers a beat dated after its arrival.
	Skew func(t *testing.T, d time.Duration, deliver bool)
	// Rejected counts the beats feeds dropped as dated after their
	// arrival.
	Rejected func() int
	// SkewDropsAll: every skewed beat is dropped (the server dates the
	// beats: NATS). Otherwise a beat dated from a chain that lost more
	// than the skew may still pass, as a lower bound (etcd).
	SkewDropsAll bool
}

// Test runs the check and its controls.
func (b BeatDating) Test(t *testing.T) {
	synced, late, bad := b.run(t, beatDatingSynced)
	t.Logf("%d Synced from another's beats, %d dated after their arrival, %d writes vouched for before they arrived", synced, late, bad)
	if synced < beatDatingSynced || late != 0 || bad != 0 {
		t.Fatalf("%d Synced in at most %v, %d dated after their arrival, %d writes vouched for before they arrived; want at least %d Synced and none of the others", synced, beatDatingHorizon, late, bad, beatDatingSynced)
	}

	t.Run("control", func(t *testing.T) {
		rejected0 := b.Rejected()
		b.Skew(t, 300*time.Millisecond, false)
		synced, late, bad := b.run(t, 0)
		dropped := b.Rejected() - rejected0
		t.Logf("beats 300 ms late: %d Synced, %d dropped, %d dated after their arrival, %d writes vouched for", synced, dropped, late, bad)
		if late != 0 || dropped == 0 {
			t.Errorf("beats 300 ms late: %d Synced dated after their arrival, %d beats dropped; want none and some", late, dropped)
		}
		if b.SkewDropsAll && (synced != 0 || bad != 0) {
			t.Errorf("beats 300 ms late: %d Synced, %d writes vouched for; want every beat dropped", synced, bad)
		}
		b.Skew(t, 300*time.Millisecond, true)
		synced, late, bad = b.run(t, 0)
		t.Logf("and the arrival check off: %d Synced, %d late, %d writes vouched for", synced, late, bad)
		if late == 0 || bad == 0 {
			t.Errorf("beats 300 ms late, delivered: %d dated after their arrival, %d writes vouched for; the checks above cannot see a beat dated too late", late, bad)
		}
	})
}

// beatDatingSynced is how many of B's Synced the check waits for, and
// beatDatingHorizon how long at most: a loaded machine slows the beats, so
// the writer goes on past its 1.5 s until they have come; only feeds that
// stopped delivering run to the horizon.
const (
	beatDatingSynced  = 5
	beatDatingHorizon = 15 * time.Second
)

// run: a writer creates keys one after another over its own store for
// 1.5 s, and on until B has delivered need Synced after its snapshot's
// (at most beatDatingHorizon), while feed A, asked all along, beats for the fleet and feed B,
// never asked, takes its Synced from A's beats only. It returns how many
// of B's Synced after its snapshot's came, how many of them were dated
// after their own arrival, and how many writes that returned before one of
// them had not reached B by then.
func (b BeatDating) run(t *testing.T, need int) (synced, late, violations int) {
	t.Helper()
	prefix := b.Prefix(t)
	w, fa, fb := b.Open(t), b.Open(t), b.Open(t)
	type arrival struct {
		c  driver.Change
		at time.Time
	}
	var mu sync.Mutex
	var got []arrival
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wantA, wantB := make(chan struct{}, 1), make(chan struct{})
	done := make(chan error, 2)
	go func() { done <- fa.FollowDemand(ctx, prefix, b.Heartbeat, wantA, func(driver.Change) {}) }()
	go func() {
		done <- fb.FollowDemand(ctx, prefix, b.Heartbeat, wantB, func(c driver.Change) {
			mu.Lock()
			got = append(got, arrival{c, time.Now()})
			mu.Unlock()
		})
	}()
	ask := time.NewTicker(2 * time.Millisecond)
	defer ask.Stop()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-ask.C:
				select {
				case wantA <- struct{}{}:
				default:
				}
			}
		}
	}()
	returned := map[string]time.Time{}
	// syncedSoFar counts B's Synced after its snapshot's.
	syncedSoFar := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, g := range got {
			if g.c.Kind == driver.ChangeSynced {
				n++
			}
		}
		return max(n-1, 0)
	}
	start := time.Now()
	for i := 0; ; i++ {
		if el := time.Since(start); el >= beatDatingHorizon || el >= 1500*time.Millisecond && syncedSoFar() >= need {
			break
		}
		key := fmt.Sprintf("%sk%d", prefix, i)
		if _, err := w.CompareAndSwap(t.Context(), key, driver.NoVersion, []byte("v"), time.Hour); err != nil {
			t.Fatal(err)
		}
		returned[key] = time.Now()
	}
	cancel()
	for range 2 {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("FollowDemand returned %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	seen := map[string]bool{}
	first := true
	for _, g := range got {
		switch g.c.Kind {
		case driver.ChangePut:
			seen[g.c.Key] = true
		case driver.ChangeLost:
			t.Fatalf("B: Lost: %v", g.c.Err)
		case driver.ChangeSynced:
			if first {
				first = false
				continue
			}
			synced++
			if g.c.At.After(g.at) {
				late++
			}
			for key, r := range returned {
				if r.Before(g.c.At) && !seen[key] {
					violations++
				}
			}
		}
	}
	return synced, late, violations
}
