package sim

import (
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/model"
)

// TestFeedCostCounted: kvbreaker+mirror's report costs every store that
// follows, and each figure is the sum of its parts: the Breakers' own
// requests, each process's session, a beat's requests at the heartbeat for
// the whole run (on a feed that beats on demand, each process's first beat
// and the fleet's beats, wipe checks and clock samples), and on a feed of
// invalidations the reads after a Stale.
// The beat figure is recomputed here from the model, so a report that left
// out a part, or a process, fails.
func TestFeedCostCounted(t *testing.T) {
	s := Scenario{Seed: 1, Hosts: 50, Workers: 8, Duration: time.Hour}
	rep, err := Run(s)
	if err != nil {
		t.Fatal(err)
	}
	var m *ModelReport
	for i := range rep.Models {
		if rep.Models[i].Mirror != nil {
			m = &rep.Models[i]
		}
	}
	if m == nil {
		t.Fatal("no kvbreaker+mirror report")
	}
	if len(m.Mirror.Feeds) != len(model.FeedStores) {
		t.Fatalf("%d feed reports, want one per store that follows (%v)", len(m.Mirror.Feeds), model.FeedStores)
	}
	procs, ref := rep.Processes, rep.Models[0].RequestsPer1000Deliveries
	deliveries := float64(m.StoreReads+m.StoreWrites) * 1000 / m.RequestsPer1000Deliveries
	for _, f := range m.Mirror.Feeds {
		fm := model.FeedModels[f.Store]
		beats := int(float64(time.Hour)/float64(feedHeartbeat)*perHeartbeat(fm)) * fm.PerBeat() * procs
		if fm.Demand != nil {
			// A beat on demand serves the fleet: at most one per
			// process per heartbeat (all asking at once), some while
			// the fleet decides.
			if most := procs * int(time.Hour/demandHeartbeat); f.FleetBeats > most || f.FleetBeats == 0 {
				t.Errorf("%s: %d beats on demand in 1 h at a heartbeat of %v, want 1 to %d", f.Store, f.FleetBeats, demandHeartbeat, most)
			}
			use := fm.DemandStart(procs)
			use.FleetBeats, use.Checks, use.Samples = f.FleetBeats, f.Checks, f.Samples
			beats = fm.Total(use) - fm.Total(model.FeedUse{Sessions: procs, DemandSessions: procs, Pages: procs * fm.Pages(0)})
		}
		if f.BeatRequests != beats {
			t.Errorf("%s: %d beat requests, want %d (%d processes, a beat's %d requests every %v/%g for 1 h)",
				f.Store, f.BeatRequests, beats, procs, fm.PerBeat(), feedHeartbeat, perHeartbeat(fm))
		}
		wantReads := 0
		if fm.Invalidations {
			wantReads = m.Mirror.FeedReads
		}
		if f.FeedReads != wantReads || f.BreakerRequests != m.StoreReads+m.StoreWrites-m.Mirror.FeedReads {
			t.Errorf("%s: feed reads %d, Breaker requests %d; want %d and %d", f.Store, f.FeedReads, f.BreakerRequests, wantReads, m.StoreReads+m.StoreWrites-m.Mirror.FeedReads)
		}
		if sum := f.SessionRequests + f.BeatRequests + f.FeedReads + f.BreakerRequests; f.Requests != sum {
			t.Errorf("%s: %d requests, the parts sum to %d", f.Store, f.Requests, sum)
		}
		if got := float64(f.Requests) * 1000 / deliveries; !near(got, f.RequestsPer1000Deliveries) || !near(f.RatioToFedify, got/ref) {
			t.Errorf("%s: %.2f per 1,000 deliveries (ratio %.4f), want %.2f (%.4f)", f.Store, f.RequestsPer1000Deliveries, f.RatioToFedify, got, got/ref)
		}
		if f.Store != "memory" && f.SessionRequests < procs {
			t.Errorf("%s: %d session requests for %d processes", f.Store, f.SessionRequests, procs)
		}
		k := f.PerKind
		if sum := k.Writes + k.LostWrites + k.BreakerReads + k.FeedReads + k.Beats + k.Checks + k.Samples + k.Sessions; !nearish(sum, f.RequestsPer1000Deliveries) {
			t.Errorf("%s: the kinds sum to %.3f per 1,000 deliveries, the report says %.3f: %+v", f.Store, sum, f.RequestsPer1000Deliveries, k)
		}
		if k.FeedReadsOwn > k.FeedReads || k.LostWrites > k.Writes+k.LostWrites {
			t.Errorf("%s: a part above its whole: %+v", f.Store, k)
		}
		if fm.Demand != nil && !fm.Demand.PerProcess && len(f.WhatIf) == 0 {
			t.Errorf("%s: no what-if costed for a feed whose beats serve the fleet", f.Store)
		}
		for _, w := range f.WhatIf {
			// Each what-if cuts, or asks later: none costs more.
			if w.Requests > f.Requests || w.Requests < f.BreakerRequests {
				t.Errorf("%s, %s: %d requests, want from the Breakers' %d to the feed's own %d", f.Store, w.Name, w.Requests, f.BreakerRequests, f.Requests)
			}
		}
		t.Logf("%-8s %9.1f per 1,000 deliveries (%.3f× fedify): beats %d, sessions %d, reads after a Stale %d, Breakers %d",
			f.Store, f.RequestsPer1000Deliveries, f.RatioToFedify, f.BeatRequests, f.SessionRequests, f.FeedReads, f.BreakerRequests)
	}
}

func perHeartbeat(fm model.FeedModel) float64 {
	if fm.BeatsPer == nil {
		return 1
	}
	return fm.BeatsPer(feedHeartbeat)
}

// nearish: equal to a part in 10⁶ (sums of rounded parts).
func nearish(a, b float64) bool { return a-b < 1e-6*max(1, b) && b-a < 1e-6*max(1, b) }

func near(a, b float64) bool { return a-b < 1e-9*max(1, b) && b-a < 1e-9*max(1, b) }
