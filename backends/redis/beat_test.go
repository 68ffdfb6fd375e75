package redis_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/internal/model"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// demandFleet runs n feeds on demand over prefix, each with a store of its
// own, until t ends; want[i] asks feed i for a beat.
type demandFleet struct {
	feeds []*feed
	want  []chan struct{}
	stop  func()
}

func startDemand(t *testing.T, stores []*redis.Store, prefix string, hb time.Duration) *demandFleet {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &demandFleet{}
	n := len(stores)
	done := make(chan error, n)
	for _, st := range stores {
		f, w := newFeed(), make(chan struct{}, 1)
		d.feeds, d.want = append(d.feeds, f), append(d.want, w)
		go func() { done <- st.FollowDemand(ctx, prefix, hb, w, f.fn) }()
	}
	d.stop = func() {
		cancel()
		for range n {
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("FollowDemand returned %v", err)
			}
		}
		d.stop = func() {}
	}
	t.Cleanup(func() { d.stop() })
	for i, f := range d.feeds {
		f.waitFor(t, 0, 10*time.Second, fmt.Sprintf("feed %d's first Synced", i), kindIs(driver.ChangeSynced))
	}
	return d
}

// synceds counts f's Synced.
func synceds(f *feed) int {
	n := 0
	for _, c := range f.snapshot() {
		if c.Kind == driver.ChangeSynced {
			n++
		}
	}
	return n
}

// TestFollowDemandCounted: three feeds on demand over one prefix, one of
// them asked for beats: its beats reach the other two, which send none,
// and the requests Redis counts over the whole run are, name by name,
// what the redis feed model says the sessions, their first beats, the
// beats on demand, the wipe checks riding on them and the clock samples
// cost. A model that leaves out the PUBLISH, or the TIME, does not match.
func TestFollowDemandCounted(t *testing.T) {
	backendtest.SessionHeld(t, 3, followDemandCounted)
}

// followDemandCounted is one run of TestFollowDemandCounted, on a server of
// its own; it returns the first Lost's error, if a feed lost its session,
// before it checks.
func followDemandCounted(t *testing.T) error {
	s := redistest.MustStart(t)
	ctl := newClient(t, s.Addr())
	// Each store's client has its connection, as a Breaker's has: the
	// feed's requests through it open none.
	var stores []*redis.Store
	for range 3 {
		st := newRaw(t, s.Addr())
		if _, _, err := st.Get(t.Context(), "demand/warm"); !errors.Is(err, driver.ErrNotFound) {
			t.Fatal(err)
		}
		stores = append(stores, st)
	}
	if err := ctl.ConfigResetStat(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	sent0, checks0, samples0 := redis.BeatCounts()
	const hb = 100 * time.Millisecond
	d := startDemand(t, stores, "demand/", hb)
	// Ask feed 0 for a beat more often than the heartbeat (it sends one
	// per heartbeat at most) for 40 asks, and on until feeds 1 and 2 have
	// each delivered two of its beats: a loaded machine slows the beats,
	// and only a fleet whose beats stopped runs to the horizon of 200
	// asks (50 heartbeats).
	heard := func() bool { return synceds(d.feeds[1]) >= 3 && synceds(d.feeds[2]) >= 3 }
	tick := time.NewTicker(hb / 4)
	start := time.Now()
	for i := 0; i < 200 && (i < 40 || !heard()); i++ {
		<-tick.C
		select {
		case d.want[0] <- struct{}{}:
		default:
		}
	}
	tick.Stop()
	asked := time.Since(start)
	for _, i := range []int{1, 2} {
		if n := synceds(d.feeds[i]); n < 3 {
			t.Errorf("feed %d, never asked, delivered %d Synced in %v: want its first and two beats of feed 0", i, n, asked)
		}
	}
	d.stop()
	for i, f := range d.feeds {
		for _, c := range f.snapshot() {
			if c.Kind == driver.ChangeLost {
				return fmt.Errorf("feed %d: Lost: %w", i, c.Err)
			}
		}
	}
	counted := serverCounts(t, ctl)
	sent, checks, samples := redis.BeatCounts()
	m := model.FeedModels["redis"]
	use := model.FeedUse{Sessions: 3, Pages: 3 * m.Pages(0), Beats: 3,
		FleetBeats: sent - sent0, Checks: checks - checks0, Samples: samples - samples0}
	// At most one beat per heartbeat asked for, and one more under way as
	// the asking stopped; at least the two that feeds 1 and 2 heard.
	if most := int(asked/hb) + 2; use.FleetBeats < 2 || use.FleetBeats > most {
		t.Errorf("%d beats on demand in %v at a heartbeat of %v, want 2 to %d", use.FleetBeats, asked, hb, most)
	}
	if err := m.Compare(use, counted, 1); err != nil {
		t.Fatal(err)
	}
	t.Logf("server counted %v: %d requests, the model %d (%+v)", counted, total(counted), m.Total(use), use)
	for _, leave := range []string{"publish", "time"} {
		ctlModel := m
		ctlModel.Requests = nil
		for _, r := range m.Requests {
			if r.Name != leave {
				ctlModel.Requests = append(ctlModel.Requests, r)
			}
		}
		if err := ctlModel.Compare(use, counted, 1); err == nil {
			t.Errorf("a model without %s matched the server's count", leave)
		}
	}
	return nil
}

// TestFollowDemandBeatDated: a beat dated wrongly, as one whose sender's
// clock ran ahead of the server's by 2 s would be, is dropped: no feed
// delivers a Synced whose At lies after its own arrival, while the fleet's
// true beats go on being delivered. The control: the same beat with the
// check turned off is delivered, and the check below catches it.
func TestFollowDemandBeatDated(t *testing.T) {
	ctl := newClient(t, srv.Addr())
	d := startDemand(t, []*redis.Store{newRaw(t, srv.Addr()), newRaw(t, srv.Addr())}, uniquePrefix(t), 100*time.Millisecond)
	forge := func() {
		t.Helper()
		now, err := ctl.Time(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		ahead := now.Add(2 * time.Second)
		if err := ctl.Publish(t.Context(), "__redis__:invalidate", fmt.Sprintf("kvbreaker:beat:0:1:1:%d:1", ahead.UnixMicro())).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// future lists the Synced of f dated after their arrival.
	future := func(f *feed) []string {
		var bad []string
		cs, at := f.arrivals()
		for i, c := range cs {
			if c.Kind == driver.ChangeSynced && c.At.After(at[i]) {
				bad = append(bad, fmt.Sprintf("Synced{At: %v} arrived at %v", c.At.Format(time.StampMicro), at[i].Format(time.StampMicro)))
			}
		}
		return bad
	}
	forge()
	// True beats, asked of feed 0 until feed 1 has three more Synced.
	want := synceds(d.feeds[1]) + 3
	deadline := time.Now().Add(10 * time.Second)
	ask := time.NewTicker(10 * time.Millisecond) // a caller asking now and then, as a mirror's calls do
	defer ask.Stop()
	for synceds(d.feeds[1]) < want {
		if time.Now().After(deadline) {
			t.Fatalf("feed 1 delivered %d Synced in 10 s, want %d: %s", synceds(d.feeds[1]), want, describe(d.feeds[1].snapshot()))
		}
		select {
		case d.want[0] <- struct{}{}:
		default:
		}
		<-ask.C
	}
	for i, f := range d.feeds {
		if bad := future(f); len(bad) > 0 {
			t.Errorf("feed %d delivered a beat dated after its arrival: %v", i, bad)
		}
	}

	redis.AcceptFutureBeats(true)
	defer redis.AcceptFutureBeats(false)
	n := len(d.feeds[1].snapshot())
	forge()
	d.feeds[1].waitFor(t, n, 10*time.Second, "the forged beat, unchecked", kindIs(driver.ChangeSynced))
	if bad := future(d.feeds[1]); len(bad) == 0 {
		t.Error("control: the forged beat, delivered unchecked, was not caught as dated after its arrival")
	}
}
