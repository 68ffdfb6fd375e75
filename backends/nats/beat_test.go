package nats_test

import (
	"context"
	"errors"
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
// meanwhile (nothing else writes: the beats) and how many Synced each
// feed delivered after its snapshot's.
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
	stored = streamLastSeq(t, js) - before
	cancel()
	for range n {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("FollowDemand returned %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return stored, append([]int(nil), synced...)
}

// TestFollowDemandFleetBeat: eight feeds on demand over one prefix, each
// asked all the time for 40 heartbeats, make the server store about one
// beat per heartbeat between them (at most 2 per heartbeat, whoever
// sends it), not one per feed, and every feed stays current on the others'
// beats (a Synced in at least half the heartbeats). The negative control,
// every feed deaf to the others' beats, makes the server store a beat per
// feed per heartbeat or so, and fails the bound.
func TestFollowDemandFleetBeat(t *testing.T) {
	const n, intervals, hb = 8, 40, 100 * time.Millisecond
	bound := uint64(2 * intervals)
	sent0, _, _ := kvnats.BeatCounts()
	stored, synced := demandRun(t, n, intervals, hb)
	sent, _, _ := kvnats.BeatCounts()
	t.Logf("%d feeds, %d heartbeats: the server stored %d beats (the feeds sent %d); Synced per feed %v", n, intervals, stored, sent-sent0, synced)
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
