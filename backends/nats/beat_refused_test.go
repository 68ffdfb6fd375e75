package nats_test

import (
	"context"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	kvnats "github.com/kvbreaker/kvbreaker/backends/nats"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/testservers/natstest"
)

// TestFollowDemandBeatRefused: a user who may read the bucket but not
// publish the beat's subject (an operator's ACL written before the beat
// existed) still gets a feed that proves itself current, by the
// per-process proof, rather than a mirror that never syncs again: asked
// all along, it delivers ten Synced after its first within a horizon of
// 100 heartbeats, which only a feed that stopped proving itself exceeds
// (the wait ends at the tenth: a loaded machine that slows the proof does
// not fail it), having tried the beat's put once.
func TestFollowDemandBeatRefused(t *testing.T) {
	const hb, need, horizon = 100 * time.Millisecond, 10, 100
	prefix := uniquePrefix(t)
	srv := natstest.MustStartWith(t, natstest.Options{Users: []natstest.User{
		{Name: "fleet", Password: "fleet-pw", DenyPublish: []string{kvnats.BeatSubjectFor(bucket, prefix)}},
	}})
	nc := connect(t, srv.URL(), natsgo.UserInfo("fleet", "fleet-pw"))
	st, err := kvnats.New(t.Context(), nc, bucket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sent0, _, _ := kvnats.BeatCounts()
	seeds0 := kvnats.BeatSeeds()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	want := make(chan struct{}, 1)
	synced := make(chan time.Time, 1024)
	lost := make(chan error, 1024)
	done := make(chan error, 1)
	go func() {
		done <- st.FollowDemand(ctx, prefix, hb, want, func(c driver.Change) {
			switch c.Kind {
			case driver.ChangeSynced:
				synced <- c.At
			case driver.ChangeLost:
				lost <- c.Err
			}
		})
	}()
	select {
	case <-synced:
	case <-time.After(10 * time.Second):
		t.Fatal("no first Synced in 10 s")
	}
	ask := time.NewTicker(hb / 10)
	defer ask.Stop()
	start := time.Now()
	end := time.After(horizon * hb)
	n := 0
loop:
	for n < need {
		select {
		case <-ask.C:
			select {
			case want <- struct{}{}:
			default:
			}
		case <-synced:
			n++
		case err := <-lost:
			t.Logf("Lost: %v", err)
		case <-end:
			break loop
		}
	}
	took := time.Since(start)
	cancel()
	<-done
	sent, _, _ := kvnats.BeatCounts()
	tried := sent - sent0 + kvnats.BeatSeeds() - seeds0
	t.Logf("%d Synced in %v asked for throughout, with the beat's subject refused; %d puts of it tried", n, took, tried)
	if tried != 1 {
		t.Errorf("%d puts of the beat's subject tried, want 1: the feed proves itself on its own once the server refused one", tried)
	}
	if n < need {
		t.Errorf("%d Synced in %v (%d heartbeats) asked for throughout, want %d: a refused beat left the feed unproven", n, took, horizon, need)
	}
}
