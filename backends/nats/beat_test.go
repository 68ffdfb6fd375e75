package nats_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	kvnats "github.com/kvbreaker/kvbreaker/backends/nats"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
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

// openDemand is a Store over a connection of its own, closed when t ends.
func openDemand(t *testing.T) backendtest.DemandStore {
	t.Helper()
	st, err := kvnats.New(t.Context(), connect(t, server.URL()), bucket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
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
	js, err := jetstream.New(connect(t, server.URL()))
	if err != nil {
		t.Fatal(err)
	}
	counted, synced := backendtest.DemandFleet{
		Open: openDemand, Prefix: uniquePrefix(t), N: n, Intervals: intervals, Heartbeat: hb, FirstWait: 10 * time.Second,
		Count:            func() int { return int(streamLastSeq(t, js)) },
		CountAfterReturn: true,
	}.Run(t)
	return uint64(counted), synced
}

// TestFollowDemandFleetBeat: eight feeds on demand over one prefix, each
// asked all the time for 40 heartbeats, make the server store about one
// beat per heartbeat between them (at most 3 per heartbeat, whoever
// sends it: feeds whose timers fire within a beat's round trip of each
// other both send, more often under load and at this short heartbeat,
// whose jitter spreads eight feeds 1.6 ms apart), not one per feed, and every feed stays current on the others'
// beats (a Synced in at least half the heartbeats). The negative control,
// every feed deaf to the others' beats, makes the server store a beat per
// feed per heartbeat or so, and fails the bound; past the bound, as under
// load, the fleet must store at most half the control's beats.
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
	// On a loaded machine a beat's round trip outlasts the jitter's spread
	// and two feeds send at once: past the bound, the fleet must still
	// store at most half the beats of feeds that each beat for themselves,
	// measured in the same run (etcd's TestFollowDemandFleetBeat).
	if stored > bound && 2*stored > ctl {
		t.Errorf("the server stored %d beats in %d heartbeats of %d feeds, want at most %d, or at most half the control's %d", stored, intervals, n, bound, ctl)
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

// TestFollowDemandBeatDated: a feed that only receives another's beats
// dates each Synced no later than its arrival, and never after a write
// that had not reached it (backendtest.BeatDating). Negative controls:
// every beat's server time moved 300 ms ahead (a server clock stepped):
// the feed drops them all (no Synced); with the arrival check off as well,
// it vouches for writes it has not received, and the check catches it.
func TestFollowDemandBeatDated(t *testing.T) {
	backendtest.BeatDating{
		Open: openDemand, Prefix: func(t *testing.T) string { return uniquePrefix(t) }, Heartbeat: 50 * time.Millisecond,
		Skew: func(t *testing.T, d time.Duration, deliver bool) {
			kvnats.SkewBeats(d)
			kvnats.AcceptLateBeats(deliver)
			t.Cleanup(func() { kvnats.SkewBeats(0); kvnats.AcceptLateBeats(false) })
		},
		Rejected:     kvnats.BeatRejected,
		SkewDropsAll: true,
	}.Test(t)
}
