package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/driver"
)

// demandFleet is n feeds on demand over one prefix, each with a store (and
// a pool) of its own; want[i] asks feed i for a beat.
type demandFleet struct {
	feeds []*feed
	want  []chan struct{}
}

// startDemand runs FollowDemand for each of stores until t ends, and waits
// for each feed's first Synced.
func startDemand(t *testing.T, stores []*postgres.Store, prefix string, hb time.Duration) *demandFleet {
	t.Helper()
	d := &demandFleet{}
	for _, st := range stores {
		f, w := &feed{wake: make(chan struct{}, 1), store: st}, make(chan struct{}, 1)
		d.feeds, d.want = append(d.feeds, f), append(d.want, w)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- st.FollowDemand(ctx, prefix, hb, w, f.fn) }()
		t.Cleanup(func() {
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("FollowDemand returned %v after its context was cancelled, want context.Canceled", err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("FollowDemand did not return within 10 s of its context's cancellation")
			}
		})
	}
	for i, f := range d.feeds {
		f.waitFor(t, fmt.Sprintf("feed %d's first Synced", i), func(ev []event) bool { return count(ev, driver.ChangeSynced) > 0 })
	}
	return d
}

// ask asks feed i for a beat every 10 ms, as a mirror's calls do, until
// the returned stop.
func (d *demandFleet) ask(i int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			select {
			case d.want[i] <- struct{}{}:
			default:
			}
		}
	}()
	return func() { cancel(); <-done }
}

func demandStores(t *testing.T, n int) []*postgres.Store {
	var stores []*postgres.Store
	for range n {
		stores = append(stores, newRaw(t))
	}
	return stores
}

// TestFollowDemand: three feeds on demand over one prefix, only feed 0
// asked for beats. Its beats, dated by the server, reach the other two,
// never asked, which sync past each write on them alone; and for each
// feed, a write that returned before a Synced's At was delivered before
// that Synced (its Stale is in the mirror the feed holds then), as
// driver.Follower promises. Unasked, the fleet sends no beat at all.
func TestFollowDemand(t *testing.T) {
	p := uniquePrefix(t)
	const hb = 100 * time.Millisecond
	d := startDemand(t, demandStores(t, 3), p, hb)
	writer := newRaw(t)

	sent0, _, _ := postgres.BeatCounts()
	stop := d.ask(0)
	v := driver.NoVersion
	for i := range 5 {
		v = put(t, writer, p+"k", v, fmt.Sprint(i), time.Hour)
		returned := time.Now()
		for j, f := range d.feeds {
			m := f.syncedSince(t, returned)
			if got, ok := m[p+"k"]; !ok || got != v {
				t.Fatalf("feed %d, healthy with a Synced after write %d returned, holds %q at %v (present %v), want %v", j, i, p+"k", got, ok, v)
			}
		}
	}
	stop()
	sent1, _, _ := postgres.BeatCounts()
	// Feeds 1 and 2 were never asked, yet synced past each write: on
	// feed 0's beats alone.
	if beats := sent1 - sent0; beats < 5 {
		t.Errorf("%d beats sent for 5 writes each seen by a later Synced", beats)
	}

	// Idle: nobody asks, nobody beats.
	idle := time.NewTimer(5 * hb)
	<-idle.C
	if sent2, _, _ := postgres.BeatCounts(); sent2 != sent1 {
		t.Errorf("%d beats sent while no feed was asked for one", sent2-sent1)
	}
}

// TestFollowDemandBeatDated: a beat dated wrongly, as a beat whose
// payload claims a server time 2 s ahead would be, is dropped: no feed
// delivers a Synced whose At lies after its own arrival, while the true
// beats go on being delivered. The control: the same beat with the check
// turned off is delivered, and the check below catches it.
func TestFollowDemandBeatDated(t *testing.T) {
	p := uniquePrefix(t)
	d := startDemand(t, demandStores(t, 2), p, 100*time.Millisecond)
	admin := newPool(t, server.URL())
	forge := func() {
		t.Helper()
		if _, err := admin.Exec(t.Context(),
			`SELECT pg_notify($1, 'b' || (extract(epoch FROM clock_timestamp() + interval '2 seconds') * 1000000)::bigint || ':forged:1')`,
			postgres.Channel(table)); err != nil {
			t.Fatal(err)
		}
	}
	// future lists the Synced of f dated after their arrival.
	future := func(f *feed) []string {
		var bad []string
		for _, e := range f.snapshot() {
			if e.Kind == driver.ChangeSynced && e.At.After(e.arrived) {
				bad = append(bad, fmt.Sprintf("Synced{At: %v} arrived at %v", e.At.Format(time.StampMicro), e.arrived.Format(time.StampMicro)))
			}
		}
		return bad
	}
	_, _, rejected0 := postgres.BeatCounts()
	forge()
	// True beats, asked of feed 0 until feed 1 has three more Synced.
	stop := d.ask(0)
	n := count(d.feeds[1].snapshot(), driver.ChangeSynced) + 3
	d.feeds[1].waitFor(t, "three Synced of feed 0's beats", func(ev []event) bool { return count(ev, driver.ChangeSynced) >= n })
	stop()
	for i, f := range d.feeds {
		if bad := future(f); len(bad) > 0 {
			t.Errorf("feed %d delivered a beat dated after its arrival: %v", i, bad)
		}
	}
	if _, _, rejected := postgres.BeatCounts(); rejected-rejected0 != 2 {
		t.Errorf("%d beats dropped as dated after their arrival, want the forged one by each of 2 feeds", rejected-rejected0)
	}

	postgres.AcceptFutureBeats(true)
	defer postgres.AcceptFutureBeats(false)
	n = count(d.feeds[1].snapshot(), driver.ChangeSynced) + 1
	forge()
	d.feeds[1].waitFor(t, "the forged beat, unchecked", func(ev []event) bool { return count(ev, driver.ChangeSynced) >= n })
	if bad := future(d.feeds[1]); len(bad) == 0 {
		t.Error("control: the forged beat, delivered unchecked, was not caught as dated after its arrival")
	}
}

// TestFollowDemandOwnBeatDated: a feed dates its own beat by the instant
// before it sent the statement, so no later than the server's clock as the
// statement ran, which the beat's payload carries (the test server runs on
// this machine, on this clock). A beat dated at its arrival, after its
// commit, is later than that, and a write committed between the two would
// be vouched for before it was delivered: the control dates its own beats
// so (DateOwnBeatsAtArrival), and the check must see it.
//
// The feed follows a table of its own, so that the beats on its channel
// are its own only: on the shared table a feed also turns every other
// feed's beats into Synced, and another's beat may come first, so a test
// pairing its Synced with "the" sender's beats paired them with another's.
// Each Synced after the snapshot's is paired with the beat of the same
// sequence number, which the payload carries.
func TestFollowDemandOwnBeatDated(t *testing.T) {
	const want = 5
	late, n := ownBeatsDated(t, want)
	if n < want {
		return // undecided, logged
	}
	for _, l := range late {
		t.Error(l)
	}
	t.Run("control-dated-at-arrival", func(t *testing.T) {
		postgres.DateOwnBeatsAtArrival(true)
		defer postgres.DateOwnBeatsAtArrival(false)
		late, n := ownBeatsDated(t, want)
		if n >= want && len(late) == 0 {
			t.Errorf("%d own beats dated at their arrival, none found after the server's clock as its statement ran: the check cannot see a beat dated after its commit", n)
		}
	})
}

// ownBeatsDated runs a feed on demand over a table of its own, asked until
// want of its beats' Synced arrived, and returns, for each Synced dated
// after the server's clock as its beat's statement ran, why, and how many
// Synced it checked. A session the load cut short (a Lost: the sequence
// numbers begin again) makes it try again, up to three times, then log
// that it could not tell and return 0.
func ownBeatsDated(t *testing.T, want int) (late []string, checked int) {
	t.Helper()
	for try := 1; try <= 3; try++ {
		late, checked, lost := ownBeatsDatedOnce(t, want)
		if !lost {
			return late, checked
		}
		t.Logf("try %d: the feed lost its session (a loaded machine); its beats' sequence numbers began again", try)
	}
	t.Logf("undecided: the feed lost its session in each of three tries")
	return nil, 0
}

func ownBeatsDatedOnce(t *testing.T, want int) (late []string, checked int, lost bool) {
	t.Helper()
	pool := newPool(t, server.URL())
	name := fmt.Sprintf("ownbeat_%d", prefixSeq.Add(1))
	if err := postgres.CreateTable(t.Context(), pool, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = pool.Exec(ctx, "DROP TABLE IF EXISTS "+name+" CASCADE; DROP SEQUENCE IF EXISTS "+name+"_version; DROP FUNCTION IF EXISTS "+name+"_notify()")
	})
	listen, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer listen.Release()
	if _, err := listen.Exec(t.Context(), "LISTEN "+postgres.Channel(name)); err != nil {
		t.Fatal(err)
	}
	st, err := postgres.New(newPool(t, server.URL()), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	d := startDemand(t, []*postgres.Store{st}, uniquePrefix(t), 100*time.Millisecond)
	stop := d.ask(0)
	ev := d.feeds[0].waitFor(t, fmt.Sprintf("%d beats' Synced", want), func(ev []event) bool {
		return count(ev, driver.ChangeSynced) > want || count(ev, driver.ChangeLost) > 0
	})
	stop()
	if count(ev, driver.ChangeLost) > 0 {
		return nil, 0, true
	}
	var synced []time.Time
	for _, e := range ev {
		if e.Kind == driver.ChangeSynced {
			synced = append(synced, e.At)
		}
	}
	// The feed's beats, as a plain LISTEN receives them: the snapshot's
	// Synced is no beat's, the k-th after it is beat k's.
	ran := map[uint64]time.Time{}
	var sender string
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for missing := len(synced) - 1; missing > 0; {
		n, err := listen.Conn().WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("the LISTEN received %d of the feed's %d beats: %v", len(ran), len(synced)-1, err)
		}
		fields := strings.Split(strings.TrimPrefix(n.Payload, "b"), ":")
		if !strings.HasPrefix(n.Payload, "b") || len(fields) != 3 {
			t.Fatalf("a notification %q on a table nothing writes: want only the feed's beats", n.Payload)
		}
		if sender == "" {
			sender = fields[1]
		}
		if fields[1] != sender {
			t.Fatalf("beats of two senders, %s and %s, on a table only one feed follows", sender, fields[1])
		}
		micros, err1 := strconv.ParseInt(fields[0], 10, 64)
		seq, err2 := strconv.ParseUint(fields[2], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("a beat %q of an unknown form", n.Payload)
		}
		if _, dup := ran[seq]; !dup && seq >= 1 && seq < uint64(len(synced)) {
			missing--
		}
		ran[seq] = time.UnixMicro(micros)
	}
	for k, at := range synced[1:] {
		r := ran[uint64(k+1)]
		if at.After(r.Add(time.Microsecond)) {
			late = append(late, fmt.Sprintf("beat %d: Synced{At: %v}, after the server's clock as its statement ran (%v)", k+1, at.Format(time.StampMicro), r.Format(time.StampMicro)))
		}
	}
	return late, len(synced) - 1, false
}

// TestFollowDemandOwnBeatSample: a follower whose own beat came back has
// read the server's clock with it, and converts another's beats with that
// reading, sampling nothing. Feed 0 beats alone first (feed 1, receiving
// its beats before sending any, samples once), then feed 1 alone (feed 0
// converts feed 1's beats): one sample in all. The control: with the
// own-beat reading ignored, feed 0 samples too, two in all.
func TestFollowDemandOwnBeatSample(t *testing.T) {
	run := func(t *testing.T) int {
		d := startDemand(t, demandStores(t, 2), uniquePrefix(t), 100*time.Millisecond)
		_, samples0, _ := postgres.BeatCounts()
		n0 := count(d.feeds[0].snapshot(), driver.ChangeSynced)
		// Feed 1's count before feed 0 beats: the beat may reach feed 1
		// before feed 0's own wait returns (CI under load: no beat after
		// the stop, and the wait ran out).
		n1 := count(d.feeds[1].snapshot(), driver.ChangeSynced)
		// Feed 0 beats until feed 1 has a Synced of one of its beats: on
		// a loaded machine the first may date no later than feed 1's
		// snapshot (its sample's span is wide), which is no news to
		// feed 1; a later one is, converted by the same sample.
		stop := d.ask(0)
		d.feeds[0].waitFor(t, "feed 0's own beat", func(ev []event) bool { return count(ev, driver.ChangeSynced) > n0 })
		d.feeds[1].waitFor(t, "feed 0's beat at feed 1", func(ev []event) bool { return count(ev, driver.ChangeSynced) > n1 })
		stop()
		n0 = count(d.feeds[0].snapshot(), driver.ChangeSynced)
		stop = d.ask(1)
		d.feeds[0].waitFor(t, "three of feed 1's beats at feed 0", func(ev []event) bool { return count(ev, driver.ChangeSynced) >= n0+3 })
		stop()
		_, samples, _ := postgres.BeatCounts()
		return samples - samples0
	}
	// Each run in a subtest of its own, so that its feeds have ended
	// before the next run's beats.
	t.Run("own-beat-readings", func(t *testing.T) {
		if n := run(t); n != 1 {
			t.Errorf("%d clock samples, want 1 (feed 1's, before it sent a beat of its own)", n)
		}
	})
	t.Run("control-ignored", func(t *testing.T) {
		postgres.IgnoreOwnBeatSamples(true)
		defer postgres.IgnoreOwnBeatSamples(false)
		if n := run(t); n != 2 {
			t.Errorf("control, own beats' readings ignored: %d clock samples, want 2", n)
		}
	})
}
