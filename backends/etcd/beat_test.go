package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

// newClientStore returns a client of its own and a Store over it, both
// closed when t ends.
func newClientStore(t testing.TB) (*clientv3.Client, *etcd.Store) {
	t.Helper()
	cli := newClient(t)
	st, err := etcd.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return cli, st
}

// openDemand is a Store over a client of its own, closed when t ends.
func openDemand(t *testing.T) backendtest.DemandStore {
	t.Helper()
	_, st := newClientStore(t)
	return st
}

// demandRun runs n feeds on demand over one prefix, each with a client of
// its own, for intervals heartbeats of hb, one feed asked each millisecond
// in turn, and returns the Puts the server counted in that span (the
// beats: nothing else writes) and each feed's Synced after its snapshot's.
func demandRun(t *testing.T, n, intervals int, hb time.Duration) (puts int, synced []int) {
	t.Helper()
	return backendtest.DemandFleet{
		Open: openDemand, Prefix: uniquePrefix(t), N: n, Intervals: intervals, Heartbeat: hb, FirstWait: feedWait,
		Count: func() int { return grpcCounts(t)["Put"] },
	}.Run(t)
}

// TestFollowDemandFleetBeat: eight feeds on demand over one prefix, asked
// in turn all along for 12 heartbeats of the mirror's default (750 ms,
// three quarters of MirrorStaleness), put about one beat per heartbeat
// between them, counted by the server, not one per feed, and each keeps
// delivering Synced. The control, every feed deaf to the others' beats,
// puts one per feed per heartbeat, above the bound. The heartbeat is the
// mirror's own: feeds whose timers fire within one beat's round trip of
// each other both send, and the jitter spreads eight feeds over an
// eighth of the heartbeat (94 ms here, 12 ms at 100 ms, less than a round
// trip on a loaded machine): past 3 beats a heartbeat the fleet must
// still put at most half the control's.
func TestFollowDemandFleetBeat(t *testing.T) {
	const n, intervals, hb = 8, 12, 750 * time.Millisecond
	bound := 3 * intervals
	puts0, _, rejected0, _ := etcd.FleetBeatCounts()
	puts, synced := demandRun(t, n, intervals, hb)
	sent, _, rejected, _ := etcd.FleetBeatCounts()
	t.Logf("%d feeds, %d heartbeats: the server counted %d Puts (the feeds %d, dropped %d); Synced per feed %v; a Synced dated %v before its arrival on average",
		n, intervals, puts, sent-puts0, rejected-rejected0, synced, etcd.BeatLag())
	if puts != sent-puts0 {
		t.Errorf("the server counted %d Puts, the feeds %d beats: a beat uncounted, or a Put not a beat", puts, sent-puts0)
	}
	if rejected != rejected0 {
		t.Errorf("%d beats dropped as dated after their arrival", rejected-rejected0)
	}
	for i, s := range synced {
		if s < intervals/2 {
			t.Errorf("feed %d delivered %d Synced in %d heartbeats", i, s, intervals)
		}
	}

	etcd.IgnoreOthersBeats(t)
	ctl, _ := demandRun(t, n, intervals, hb)
	t.Logf("control, each feed deaf to the others' beats: the server counted %d Puts", ctl)
	if ctl <= bound {
		t.Errorf("control: the server counted %d beats, within the bound %d: the test cannot tell one beat per feed from one per fleet", ctl, bound)
	}
	// On a loaded machine a beat's round trip outlasts the jitter's spread
	// and two feeds send at once: past the bound, the fleet must still
	// send at most half the beats of feeds that each beat for themselves,
	// measured in the same run.
	if puts > bound && 2*puts > ctl {
		t.Errorf("the server counted %d beats in %d heartbeats of %d feeds, want at most %d, or at most half the control's %d", puts, intervals, n, bound, ctl)
	}
}

// TestFollowDemandBeatDated: a feed that only receives another's beats
// dates each Synced no later than its arrival, and never after a write
// that had not reached it (backendtest.BeatDating). Negative controls:
// every beat's elapsed time 300 ms longer (a sender whose clock ran fast):
// the feed drops those that would date after their arrival (some, dated
// from a chain that lost more than 300 ms, may still pass as lower
// bounds); with the arrival check off as well, it vouches for writes it
// has not received, and the check catches it.
func TestFollowDemandBeatDated(t *testing.T) {
	backendtest.BeatDating{
		Open: openDemand, Prefix: func(t *testing.T) string { return uniquePrefix(t) }, Heartbeat: followHeartbeat,
		Skew: func(t *testing.T, d time.Duration, deliver bool) { etcd.SkewBeatDelta(t, d, deliver) },
		Rejected: func() int {
			_, _, rejected, _ := etcd.FleetBeatCounts()
			return rejected
		},
	}.Test(t)
}

// TestBeatKeyReserved: a prefix's beat key is no record: List never
// shows it, and a feed's snapshot and watch do not deliver it, though the
// server holds it.
func TestBeatKeyReserved(t *testing.T) {
	cli, st := newClientStore(t)
	prefix := uniquePrefix(t)
	if _, err := cli.Put(t.Context(), prefix+etcd.BeatSuffix, "kvbreaker-beat x"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(t.Context(), prefix+"k", "v"); err != nil {
		t.Fatal(err)
	}
	keys, _, err := st.List(t.Context(), prefix, "", 100)
	if err != nil || len(keys) != 1 || keys[0] != prefix+"k" {
		t.Errorf("List(%q) with a beat key stored = %q, %v; want only %sk", prefix, keys, err, prefix)
	}
	got := make(chan driver.Change, 16)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- st.Follow(ctx, prefix, time.Hour, func(c driver.Change) { got <- c }) }()
	wait := func(what string, stop func(driver.Change) bool) {
		t.Helper()
		for {
			select {
			case c := <-got:
				if c.Kind == driver.ChangeLost || (c.Kind == driver.ChangePut || c.Kind == driver.ChangeDelete) && c.Key != prefix+"k" && c.Key != prefix+"after" {
					t.Errorf("Follow(%q) delivered %v %q with a beat key stored", prefix, c.Kind, c.Key)
				}
				if stop(c) {
					return
				}
			case <-time.After(feedWait):
				t.Fatalf("no %s within %v", what, feedWait)
			}
		}
	}
	wait("snapshot", func(c driver.Change) bool { return c.Kind == driver.ChangeSynced })
	if _, err := cli.Put(t.Context(), prefix+etcd.BeatSuffix, "kvbreaker-beat x"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(t.Context(), prefix+etcd.BeatSuffix); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(t.Context(), prefix+"after", "v"); err != nil {
		t.Fatal(err)
	}
	wait("the write after the beat", func(c driver.Change) bool { return c.Kind == driver.ChangePut && c.Key == prefix+"after" })
	cancel()
	<-done
}

// TestFollowDemandReadOnlyUser: with etcd's authentication on, a user
// whose role may read the prefix but not write it follows it on demand:
// refused the beat's put, the feed falls back, once, to proving itself
// current on its own (a linearizable read and a progress request) and
// keeps delivering Synced while asked: ten after its snapshot's arrive
// within a horizon of 200 heartbeats, which only a feed that stopped
// delivering exceeds (the wait ends at the tenth, so a loaded machine
// that slows the feed does not fail it). The control, a feed that goes
// on trying the put, delivers no Synced after its snapshot's in as long
// as the fallback took to deliver its ten: a mirror that never syncs.
func TestFollowDemandReadOnlyUser(t *testing.T) {
	const prefix, want, horizon = "fleet-r/", 10, 200 * followHeartbeat
	srv := startWithUser(t, "reader", prefix, clientv3.PermissionType(clientv3.PermRead))
	ctx := t.Context()
	// run follows the prefix as the reader, asked all along, until need
	// Synced after the snapshot's have arrived or for span, and returns
	// how many arrived and how long it followed.
	run := func(t *testing.T, need int, span time.Duration) (synced int, took time.Duration) {
		cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second,
			Username: "reader", Password: "reader-password", Context: ctx, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cli.Close() })
		st, err := etcd.New(cli)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		got := make(chan driver.Change, 1<<10)
		asked := make(chan struct{}, 1)
		fctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- st.FollowDemand(fctx, prefix, followHeartbeat, asked, func(c driver.Change) { got <- c })
		}()
		go backendtest.Ask(fctx, asked, 5*time.Millisecond)
		start := time.Now()
		end := time.After(span)
		first := true
	loop:
		for synced < need {
			select {
			case c := <-got:
				switch c.Kind {
				case driver.ChangeLost:
					t.Fatalf("Lost: %v", c.Err)
				case driver.ChangeSynced:
					if first {
						first = false
						continue
					}
					synced++
				}
			case err := <-done:
				t.Fatalf("FollowDemand returned %v", err)
			case <-end:
				break loop
			}
		}
		took = time.Since(start)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("FollowDemand returned %v", err)
		}
		if first {
			t.Fatal("no snapshot's Synced: the reader cannot follow at all")
		}
		return synced, took
	}
	_, _, _, fallbacks0 := etcd.FleetBeatCounts()
	synced, took := run(t, want, horizon)
	_, _, _, fallbacks := etcd.FleetBeatCounts()
	t.Logf("a reader asked all along: %d Synced after its snapshot's in %v, %d fallbacks", synced, took, fallbacks-fallbacks0)
	if synced < want || fallbacks-fallbacks0 != 1 {
		t.Errorf("a reader asked all along: %d Synced in %v (horizon %v), %d fallbacks; want %d and one", synced, took, horizon, fallbacks-fallbacks0, want)
	}
	t.Run("control", func(t *testing.T) {
		etcd.NoFallback(t)
		// As long as the fallback took, and no less than 20 heartbeats.
		span := max(took, 20*followHeartbeat)
		if synced, _ := run(t, 1, span); synced != 0 {
			t.Errorf("a reader that goes on trying the put: %d Synced in %v; the test cannot tell a fallback from none", synced, span)
		}
	})
}
