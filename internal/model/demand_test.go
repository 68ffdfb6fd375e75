package model

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestDemandFleet: a fleet whose processes all decide all along sends
// about one beat per heartbeat in all, as one process alone does, not one
// per process (but for a feed whose beat serves its sender alone: one per
// process); an idle fleet sends none; each process samples the store's
// clock at most once per SampleEvery (and at least once, unless its own
// beats are samples); a wipe check rides on a beat at most
// once per CheckEvery heartbeats.
func TestDemandFleet(t *testing.T) {
	for _, name := range FeedStores {
		if m := FeedModels[name]; m.Demand != nil {
			t.Run(name, func(t *testing.T) { testDemandFleet(t, m) })
		}
	}
}

func testDemandFleet(t *testing.T, m FeedModel) {
	const hb, delay = 750 * time.Millisecond, 5 * time.Millisecond
	start := time.Unix(0, 0)
	run := func(procs int, calls int) FeedUse {
		f := NewDemandFleet(m, procs, hb, delay, start)
		for i := range calls {
			f.Call(i%procs, start.Add(time.Duration(i)*10*time.Millisecond))
		}
		return f.Use
	}
	const span = 100 * time.Second // 10,000 calls 10 ms apart
	one, eight := run(1, 10_000), run(8, 10_000)
	// Each beat once the newest is a heartbeat old, and at most the
	// jitter's eighth of a heartbeat more.
	most, least := int(span/hb)+1, int(span/(hb+hb/8))-1
	for procs, u := range map[int]FeedUse{1: one, 8: eight} {
		each := 1
		if m.Demand.PerProcess {
			// A beat serves its sender alone: each process beats
			// as one alone does.
			each = procs
		}
		if u.FleetBeats < each*least || u.FleetBeats > each*most {
			t.Errorf("%d processes: %d beats in %v at a heartbeat of %v, want %d to %d: %+v", procs, u.FleetBeats, span, hb, each*least, each*most, u)
		}
	}
	switch {
	case m.Demand.SampleEvery == 0:
		if eight.Samples != 0 {
			t.Errorf("%d clock samples by a feed that takes none", eight.Samples)
		}
	case eight.Samples > 8*(int(span/m.Demand.SampleEvery)+1) || eight.Samples < 8 && !m.Demand.OwnBeatSamples:
		t.Errorf("%d clock samples by 8 processes in %v, want one per process per %v", eight.Samples, span, m.Demand.SampleEvery)
	}
	if m.Demand.CheckEachBeat {
		if eight.Checks != eight.FleetBeats {
			t.Errorf("%d wipe checks for %d beats, want one each", eight.Checks, eight.FleetBeats)
		}
	} else if m.Demand.CheckEvery == 0 {
		if eight.Checks != 0 {
			t.Errorf("%d wipe checks by a feed that makes none", eight.Checks)
		}
	} else if c := int(float64(span)/(m.Demand.CheckEvery*float64(hb))) + 1; eight.Checks > c || eight.Checks < c/2 {
		t.Errorf("%d wipe checks in %v, want about %d", eight.Checks, span, c)
	}
	first := 0
	if m.Demand.FirstBeat {
		first = 8
	}
	if idle := run(8, 0); idle.FleetBeats != 0 || idle.Samples != 0 || idle.Checks != 0 || idle.Beats != first || idle.Sessions != 8 {
		t.Errorf("an idle fleet of 8: %+v, want its sessions and their first beats (%d) only", idle, first)
	}
}

// TestDemandFleetCommits: on a store whose every change would date the
// feeds (DemandFleet.Commit), a fleet that writes more often than the
// heartbeat needs no beat while it decides; the control, the same calls
// without the writes, beats. A feed whose beat serves its sender alone
// takes nothing from the writes.
func TestDemandFleetCommits(t *testing.T) {
	const hb, delay = 750 * time.Millisecond, 5 * time.Millisecond
	start := time.Unix(0, 0)
	run := func(m FeedModel, writes bool) FeedUse {
		f := NewDemandFleet(m, 8, hb, delay, start)
		for i := range 10_000 {
			at := start.Add(time.Duration(i) * 10 * time.Millisecond)
			if writes && i%20 == 0 {
				f.Commit(at)
			}
			f.Call(i%8, at)
		}
		return f.Use
	}
	pg := FeedModels["postgres"]
	if u := run(pg, true); u.FleetBeats != 0 {
		t.Errorf("%d beats by a fleet whose writes, every 200 ms, dated its feeds", u.FleetBeats)
	}
	if u := run(pg, false); u.FleetBeats == 0 {
		t.Error("control: the fleet without its writes sent no beat")
	}
	// No store's feed beats for its own process alone on demand but
	// etcd's fallback, for a client refused the beat's put.
	alone := FeedModels["etcd"]
	alone.Demand = &DemandBeats{PerProcess: true}
	if with, without := run(alone, true), run(alone, false); with != without {
		t.Errorf("a feed whose beat serves its sender alone: %+v with the writes, %+v without", with, without)
	}
}

// TestDemandFleetOwnBeatSamples: a fleet whose members call in random
// order, so that each sends beats in turn, on a feed whose own beat's
// return is a clock sample, samples less than the same fleet that must
// read the clock for each conversion (the control: the same feed without
// OwnBeatSamples).
func TestDemandFleetOwnBeatSamples(t *testing.T) {
	const hb, delay = 750 * time.Millisecond, 5 * time.Millisecond
	start := time.Unix(0, 0)
	run := func(own bool) FeedUse {
		m := FeedModels["postgres"]
		d := *m.Demand
		d.OwnBeatSamples = own
		m.Demand = &d
		f := NewDemandFleet(m, 8, hb, delay, start)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range 100_000 { // 1,000 s
			f.Call(rng.IntN(8), start.Add(time.Duration(i)*10*time.Millisecond))
		}
		return f.Use
	}
	with, without := run(true), run(false)
	if with.FleetBeats != without.FleetBeats {
		t.Errorf("%d beats with own-beat samples, %d without: the samples must not change the beats", with.FleetBeats, without.FleetBeats)
	}
	if with.Samples*2 > without.Samples {
		t.Errorf("%d clock samples with own-beat samples, %d without: want fewer than half", with.Samples, without.Samples)
	}
	t.Logf("clock samples in 1,000 s: %d with own-beat samples, %d without", with.Samples, without.Samples)
}
