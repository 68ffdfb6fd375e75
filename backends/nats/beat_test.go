package nats_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	kvnats "github.com/kvbreaker/kvbreaker/backends/nats"
	"github.com/kvbreaker/kvbreaker/driver"
)

// streamLastSeq is the server's last sequence of the bucket's stream: it
// counts every message the server stored.
func streamLastSeq(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	st, err := js.Stream(t.Context(), "KV_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().State.LastSeq
}

// demandRun runs n feeds on demand over one prefix, each with a
// connection of its own, each asked for a beat every n ms in turn, for
// intervals heartbeats; it returns how many messages the server stored
// from the first ask until every feed returned (nothing else writes: the
// beats; a put under way as the run ends is stored or not before its
// feed returns) and how many Synced each feed delivered after its
// snapshot's.
func demandRun(t *testing.T, n, intervals int, hb time.Duration) (stored uint64, synced []int) {
	t.Helper()
	nc0 := connect(t, server.URL())
	js, err := jetstream.New(nc0)
	if err != nil {
		t.Fatal(err)
	}
	prefix := uniquePrefix(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	synced = make([]int, n)
	lost := make(chan error, n)
	first := make(chan struct{}, n)
	wants := make([]chan struct{}, n)
	done := make(chan error, n)
	for i := range n {
		st, err := kvnats.New(t.Context(), connect(t, server.URL()), bucket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		wants[i] = make(chan struct{}, 1)
		seen := 0
		go func() {
			done <- st.FollowDemand(ctx, prefix, hb, wants[i], func(c driver.Change) {
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
		case <-time.After(10 * time.Second):
			t.Fatal("a feed delivered no first Synced in 10 s")
		}
	}
	before := streamLastSeq(t, js)
	// One feed asked each millisecond, in turn: the processes' calls
	// come at times of their own.
	ask := time.NewTicker(time.Millisecond)
	end := time.NewTimer(time.Duration(intervals) * hb)
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
	cancel()
	for range n {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("FollowDemand returned %v", err)
		}
	}
	stored = streamLastSeq(t, js) - before
	mu.Lock()
	defer mu.Unlock()
	return stored, append([]int(nil), synced...)
}

// TestFollowDemandFleetBeat: eight feeds on demand over one prefix, each
// asked all the time for 40 heartbeats, make the server store about one
// beat per heartbeat between them (at most 3 per heartbeat, whoever
// sends it: feeds whose timers fire within a beat's round trip of each
// other both send, more often under load and at this short heartbeat,
// whose jitter spreads eight feeds 1.6 ms apart), not one per feed, and every feed stays current on the others'
// beats (a Synced in at least half the heartbeats). The negative control,
// every feed deaf to the others' beats, makes the server store a beat per
// feed per heartbeat or so, and fails the bound.
func TestFollowDemandFleetBeat(t *testing.T) {
	const n, intervals, hb = 8, 40, 100 * time.Millisecond
	bound := uint64(3 * intervals)
	sent0, _, samples0 := kvnats.BeatCounts()
	rejected0, unanswered0 := kvnats.BeatRejected(), kvnats.BeatUnanswered()
	stored, synced := demandRun(t, n, intervals, hb)
	sent, _, samples := kvnats.BeatCounts()
	unanswered := kvnats.BeatUnanswered() - unanswered0
	t.Logf("%d feeds, %d heartbeats: the server stored %d beats (the feeds sent %d, %d of them unanswered, sampled the server's clock %d times, dropped %d); Synced per feed %v",
		n, intervals, stored, sent-sent0, unanswered, samples-samples0, kvnats.BeatRejected()-rejected0, synced)
	// A put cut short by the run's end is stored or not: the count is
	// exact but for those.
	if int(stored) > sent-sent0 || int(stored) < sent-sent0-unanswered {
		t.Errorf("the server stored %d messages, the feeds counted %d beats (%d unanswered): a beat uncounted, or a message not a beat", stored, sent-sent0, unanswered)
	}
	// A sample serves 30 s: each feed takes one to convert its first
	// beat from another, and drops none.
	if samples-samples0 > n || kvnats.BeatRejected() != rejected0 {
		t.Errorf("%d clock samples and %d beats dropped by %d feeds in %v, want at most one each and none", samples-samples0, kvnats.BeatRejected()-rejected0, n, intervals*hb)
	}
	if stored > bound {
		t.Errorf("the server stored %d beats in %d heartbeats of %d feeds, want at most %d", stored, intervals, n, bound)
	}
	for i, s := range synced {
		if s < intervals/2 {
			t.Errorf("feed %d delivered %d Synced in %d heartbeats", i, s, intervals)
		}
	}

	kvnats.IgnoreOthersBeats(true)
	defer kvnats.IgnoreOthersBeats(false)
	ctl, _ := demandRun(t, n, intervals, hb)
	t.Logf("control, each feed deaf to the others' beats: the server stored %d beats", ctl)
	if ctl <= bound {
		t.Errorf("control: the server stored %d beats, within the bound %d: the test cannot tell one beat per feed from one per fleet", ctl, bound)
	}
}

// TestBeatSubjectReserved: the beat's subject is no key's: List never
// shows it, and a feed's snapshot does not deliver it as a record, though
// the bucket holds it.
func TestBeatSubjectReserved(t *testing.T) {
	nc := connect(t, server.URL())
	st, err := kvnats.New(t.Context(), nc, bucket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, prefix := range []string{uniquePrefix(t), uniquePrefix(t) + "partial", ""} {
		subject := st.BeatSubject(prefix)
		if err := nc.Publish(subject, []byte("kvbreaker-beat x 1")); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if prefix == "" {
			continue // the whole bucket: other tests' keys
		}
		keys, _, err := st.List(t.Context(), prefix[:len(prefix)-len("partial")], "", 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 0 {
			t.Errorf("List(%q) after a beat on %s = %q, want none", prefix, subject, keys)
		}
		got := make(chan driver.Change, 16)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- st.Follow(ctx, prefix, time.Hour, func(c driver.Change) { got <- c }) }()
		for c := range got {
			if c.Kind == driver.ChangePut || c.Kind == driver.ChangeDelete || c.Kind == driver.ChangeLost {
				t.Errorf("Follow(%q) delivered %v with a beat in the bucket", prefix, c)
			}
			if c.Kind == driver.ChangeSynced {
				break
			}
		}
		cancel()
		<-done
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), "KV_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context(), jetstream.WithSubjectFilter(st.BeatSubject("")))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[st.BeatSubject("")]; n != 1 {
		t.Fatalf("the bucket holds %d messages on %s, want 1: the beats were not stored, so the test shows nothing", n, st.BeatSubject(""))
	}
}

// datedRun: a writer creates keys one after another over its own
// connection for 1.5 s while feed A, asked all along, beats for the
// fleet and feed B, never asked, takes its Synced from A's beats only. It
// returns how many of B's Synced after its snapshot's came, how many of
// them were dated after their own arrival, and how many writes that
// returned before one of them had not reached B by then.
func datedRun(t *testing.T) (synced, late, violations int) {
	t.Helper()
	prefix := uniquePrefix(t)
	newStore := func() *kvnats.Store {
		st, err := kvnats.New(t.Context(), connect(t, server.URL()), bucket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	w, a, b := newStore(), newStore(), newStore()
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
	go func() { done <- a.FollowDemand(ctx, prefix, 50*time.Millisecond, wantA, func(driver.Change) {}) }()
	go func() {
		done <- b.FollowDemand(ctx, prefix, 50*time.Millisecond, wantB, func(c driver.Change) {
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
	end := time.Now().Add(1500 * time.Millisecond)
	for i := 0; time.Now().Before(end); i++ {
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
		case driver.ChangeLost, driver.ChangeReset:
			if g.c.Kind == driver.ChangeLost {
				t.Fatalf("B: Lost: %v", g.c.Err)
			}
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

// TestFollowDemandBeatDated: a feed that only receives another's beats
// dates each Synced no later than its arrival, and never after a write
// that had not reached it (every write that returned before At has been
// delivered before the Synced). Negative controls: every beat's server
// time moved 300 ms ahead (a server clock stepped): the feed drops them
// (no Synced); with the arrival check off as well, it vouches for writes
// it has not received, and the check above catches it.
func TestFollowDemandBeatDated(t *testing.T) {
	synced, late, bad := datedRun(t)
	t.Logf("%d Synced from another's beats, %d dated after their arrival, %d writes vouched for before they arrived", synced, late, bad)
	if synced < 5 || late != 0 || bad != 0 {
		t.Fatalf("%d Synced, %d dated after their arrival, %d writes vouched for before they arrived; want at least 5 Synced and none of the others", synced, late, bad)
	}

	kvnats.SkewBeats(300 * time.Millisecond)
	defer kvnats.SkewBeats(0)
	rejected := kvnats.BeatRejected()
	synced, late, bad = datedRun(t)
	dropped := kvnats.BeatRejected() - rejected
	t.Logf("beats 300 ms ahead: %d Synced, %d dropped, %d dated after their arrival, %d writes vouched for before they arrived", synced, dropped, late, bad)
	if synced != 0 || late != 0 || bad != 0 || dropped == 0 {
		t.Fatalf("beats 300 ms ahead: %d Synced, %d dropped, %d late, %d writes vouched for; want none delivered and some dropped", synced, dropped, late, bad)
	}

	kvnats.AcceptLateBeats(true)
	defer kvnats.AcceptLateBeats(false)
	synced, late, bad = datedRun(t)
	t.Logf("control, beats 300 ms ahead delivered: %d Synced, %d dated after their arrival, %d writes vouched for before they arrived", synced, late, bad)
	if late == 0 || bad == 0 {
		t.Fatal("control: beats dated 300 ms ahead, delivered, were neither dated after their arrival nor vouched for a write before it arrived: the checks cannot fail")
	}
}
