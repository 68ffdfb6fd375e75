package nats_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	kvnats "github.com/kvbreaker/kvbreaker/backends/nats"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/model"
)

// TestFollowRequestsCounted holds the simulator's NATS feed model
// (model.FeedModels["nats"]) to what the connection itself counts over one
// Follow of a prefix nobody writes while it runs: the messages it
// published (nats.Conn.Stats().OutMsgs; every JetStream API request is
// one). On an idle prefix each beat proves the feed current at once, so
// the beats are the Synced after the snapshot's; one more tick may have
// been in flight when the feed ended, or have come before the snapshot
// was whole; that slack of one beat's request also covers the consumer's
// deletion, which the model takes from the code. A control model without
// the beat's consumer info fails.
func TestFollowRequestsCounted(t *testing.T) {
	nc := connect(t, server.URL())
	st, err := kvnats.New(t.Context(), nc, bucket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	prefix := uniquePrefix(t)
	const keys = 10
	for i := range keys {
		if _, err := st.CompareAndSwap(t.Context(), prefix+strconv.Itoa(i), driver.NoVersion, []byte("v"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	before := nc.Stats().OutMsgs

	synced := 0
	got := make(chan driver.Change, 1<<12)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- st.Follow(ctx, prefix, 50*time.Millisecond, func(c driver.Change) { got <- c }) }()
	for synced < 6 {
		select {
		case c := <-got:
			if c.Kind == driver.ChangeSynced {
				synced++
			}
			if c.Kind == driver.ChangeLost {
				t.Fatalf("Lost: %v", c.Err)
			}
		case err := <-done:
			t.Fatalf("Follow returned %v", err)
		case <-time.After(15 * time.Second):
			t.Fatalf("%d Synced in 15 s", synced)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow returned %v", err)
	}
	counted := int(nc.Stats().OutMsgs - before)

	m := model.FeedModels["nats"]
	use := model.FeedUse{Sessions: 1, Pages: m.Pages(keys), Keys: keys, Beats: synced - 1}
	within := func(fm model.FeedModel) bool {
		w := fm.Total(use)
		return counted >= w && counted <= w+fm.PerBeat()
	}
	if !within(m) {
		t.Fatalf("the connection published %d requests over %d beats; the model says %d (%v), or one beat more", counted, use.Beats, m.Total(use), m.Count(use))
	}
	t.Logf("the connection published %d requests over %d beats; the model %v", counted, use.Beats, m.Count(use))

	ctlModel := m
	ctlModel.Requests = nil
	for _, r := range m.Requests {
		if r.Name != "CONSUMER.INFO" {
			ctlModel.Requests = append(ctlModel.Requests, r)
		}
	}
	if within(ctlModel) {
		t.Fatal("a model without the beat's consumer info matched the connection's count")
	}
}

// TestFollowDemandCounted: a feed on demand, asked for beats every 10 ms
// until it has delivered six Synced, then nothing for five heartbeats,
// publishes what the NATS feed model says its session and the fleet beats
// it sent cost (each a put of the reserved subject, a stream info for each
// wipe check and each clock sample; the consumer's deletion taken from the
// code), and no beat while not asked. Alone, each beat is its own, back
// with its timestamp: a sample. A control model without the beat's put
// fails, and one whose check is no stream info.
func TestFollowDemandCounted(t *testing.T) {
	nc := connect(t, server.URL())
	st, err := kvnats.New(t.Context(), nc, bucket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	prefix := uniquePrefix(t)
	const hb = 50 * time.Millisecond
	before := nc.Stats().OutMsgs
	sent0, checks0, samples0 := kvnats.BeatCounts()

	synced := 0
	got := make(chan driver.Change, 1<<12)
	want := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- st.FollowDemand(ctx, prefix, hb, want, func(c driver.Change) { got <- c }) }()
	ask := time.NewTicker(10 * time.Millisecond)
	deadline := time.After(15 * time.Second)
	for synced < 6 {
		select {
		case c := <-got:
			if c.Kind == driver.ChangeSynced {
				synced++
			}
			if c.Kind == driver.ChangeLost {
				t.Fatalf("Lost: %v", c.Err)
			}
		case <-ask.C:
			if synced > 0 {
				select {
				case want <- struct{}{}:
				default:
				}
			}
		case err := <-done:
			t.Fatalf("FollowDemand returned %v", err)
		case <-deadline:
			t.Fatalf("%d Synced in 15 s", synced)
		}
	}
	ask.Stop()
	select {
	case <-want: // an ask left in the channel is not taken after this
	default:
	}
	// A beat taken before then ends within its timeout (max(hb, 1 s)):
	// count it as asked.
	settle := time.NewTimer(time.Second + 2*hb)
	<-settle.C
	busy, _, _ := kvnats.BeatCounts()
	busy -= sent0
	idle := time.NewTimer(5 * hb)
	<-idle.C
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("FollowDemand returned %v", err)
	}
	sent, checks, samples := kvnats.BeatCounts()
	sent, checks, samples = sent-sent0, checks-checks0, samples-samples0
	if sent != busy {
		t.Errorf("%d beats sent while nothing asked for one", sent-busy)
	}
	counted := int(nc.Stats().OutMsgs - before)
	m := model.FeedModels["nats"]
	use := m.DemandStart(1)
	use.FleetBeats, use.Checks, use.Samples = sent, checks, samples
	if sent < 5 || checks < 1 {
		t.Errorf("%d beats and %d checks for 5 Synced after the snapshot's", sent, checks)
	}
	if w := m.Total(use); counted != w {
		t.Fatalf("the connection published %d requests over %d beats on demand (%d checks, %d samples); the model says %d (%v)", counted, sent, checks, samples, w, m.Count(use))
	}
	t.Logf("the connection published %d requests over %d beats on demand (%d checks, %d samples); the model %v", counted, sent, checks, samples, m.Count(use))
	for _, ctl := range []struct {
		name string
		edit func(*model.FeedRequest)
	}{
		{"whose beat puts nothing", func(r *model.FeedRequest) { r.PerFleetBeat = 0 }},
		{"whose wipe check is no stream info", func(r *model.FeedRequest) { r.PerCheck = 0 }},
	} {
		ctlModel := m
		ctlModel.Requests = nil
		for _, r := range m.Requests {
			ctl.edit(&r)
			ctlModel.Requests = append(ctlModel.Requests, r)
		}
		if ctlModel.Total(use) == counted {
			t.Errorf("a model %s matched the connection's count", ctl.name)
		}
	}
}
