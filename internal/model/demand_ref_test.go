package model

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestDemandFleetAsReference: DemandFleet, which counts in durations since
// its start, counts what refDemandFleet, the same rules on time.Time (as
// DemandFleet was written first), counts, on random streams of calls and
// commits for every feed on demand and for fleets with every option, so
// that the simulator's feed costs did not change when its arithmetic did.
// Its negative control: a stream whose last call moves a millisecond
// later, in a fleet of one process that beats on the next call after a
// heartbeat, changes the count of beats, and the comparison sees it.
func TestDemandFleetAsReference(t *testing.T) {
	var demands []DemandBeats
	for _, name := range FeedStores {
		if m := FeedModels[name]; m.Demand != nil {
			demands = append(demands, *m.Demand)
		}
	}
	demands = append(demands,
		DemandBeats{CheckEvery: 4, SampleEvery: 30 * time.Second, Jitter: 8, OwnBeatSamples: true},
		DemandBeats{CheckEvery: 2, SampleEvery: 5 * time.Second, MarkerRefresh: 20 * time.Second, Jitter: 4, FirstBeat: true, SenderSamples: true},
		DemandBeats{SampleEvery: time.Second, MarkerRefresh: 3 * time.Second, PerProcess: true},
	)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		d := demands[int(seed)%len(demands)]
		m := FeedModel{Store: "test", Demand: &d}
		procs := 1 + rng.IntN(9)
		hb := time.Duration(100+rng.IntN(1000)) * time.Millisecond
		delay := time.Duration(rng.IntN(20)) * time.Millisecond
		f := NewDemandFleet(m, procs, hb, delay, start)
		ref := newRefDemandFleet(m, procs, hb, delay, start)
		at := start
		for i := range 20_000 {
			at = at.Add(time.Duration(rng.IntN(200)) * time.Millisecond)
			if rng.IntN(10) == 0 {
				f.Commit(at)
				ref.Commit(at)
				continue
			}
			p := rng.IntN(procs)
			f.Call(p, at)
			ref.Call(p, at)
			if f.Use != ref.Use {
				t.Fatalf("seed %d (%+v), call %d: %+v, the reference %+v", seed, d, i, f.Use, ref.Use)
			}
		}
		if f.Use.FleetBeats == 0 {
			t.Fatalf("seed %d: no beat in 20,000 calls: the comparison compared nothing", seed)
		}
	}
	// The negative control.
	m := FeedModel{Store: "test", Demand: &DemandBeats{}}
	a, b := NewDemandFleet(m, 1, time.Second, 0, start), newRefDemandFleet(m, 1, time.Second, 0, start)
	a.Call(0, start.Add(time.Second))
	b.Call(0, start.Add(time.Second-time.Millisecond))
	if a.Use == b.Use {
		t.Fatalf("a call a heartbeat after the start and one a millisecond before it both counted %+v", a.Use)
	}
}

// refDemandFleet is DemandFleet as first written, on time.Time.
type refDemandFleet struct {
	d         DemandBeats
	hb, delay time.Duration
	extra     []time.Duration // each process's jitter
	last      []time.Time     // each process's newest Synced
	sampled   []time.Time     // each process's last clock sample (zero: none)
	inflight  []bool
	pending   []refDemandBeat
	checked   time.Time
	ownCheck  []time.Time // each process's last check of its own marker
	// Use is what the fleet's feeds sent so far: a session each, its
	// first beat (a PING of its own), and the beats on demand.
	Use FeedUse
}

type refDemandBeat struct {
	at, arrives time.Time
	proc        int
}

// NewrefDemandFleet starts procs processes' feeds at start, each with a
// session whose snapshot found the store empty, and its first Synced.
func newRefDemandFleet(m FeedModel, procs int, heartbeat, delay time.Duration, start time.Time) *refDemandFleet {
	f := &refDemandFleet{d: *m.Demand, hb: heartbeat, delay: delay,
		last: make([]time.Time, procs), sampled: make([]time.Time, procs), inflight: make([]bool, procs)}
	f.extra = make([]time.Duration, procs)
	f.ownCheck = make([]time.Time, procs)
	for p := range procs {
		f.last[p] = start
		f.ownCheck[p] = start
		if m.Demand.Jitter > 0 {
			f.extra[p] = heartbeat / time.Duration(m.Demand.Jitter) * time.Duration(p) / time.Duration(procs)
		}
	}
	f.Use = m.DemandStart(procs)
	return f
}

// sample counts proc's clock sample at t if its last is too old.
func (f *refDemandFleet) sample(proc int, t time.Time) {
	if f.sampled[proc].IsZero() || t.Sub(f.sampled[proc]) >= f.d.SampleEvery {
		f.sampled[proc] = t
		f.Use.Samples++
	}
}

// Commit is a commit at t (in time order with the calls) on a store
// whose every change carried the server's clock: it would reach every
// process delay later and date its feed as a beat does, each follower
// converting it with its clock sample. No store does this today; it
// costs what such a feed would save (see internal/sim's what-ifs). A
// feed that beats for its own process alone (PerProcess) ignores it.
func (f *refDemandFleet) Commit(t time.Time) {
	if f.d.PerProcess {
		return
	}
	f.pending = append(f.pending, refDemandBeat{at: t, arrives: t.Add(f.delay), proc: -1})
}

// Call is a call of proc at t (the calls in time order).
func (f *refDemandFleet) Call(proc int, t time.Time) {
	for q, c := range f.ownCheck {
		if f.d.MarkerRefresh == 0 {
			break
		}
		// A follower whose own marker went unchecked for half its
		// hour checks it on its own (Checks).
		for t.Sub(c) > f.d.MarkerRefresh {
			c = c.Add(f.d.MarkerRefresh)
			f.Use.Checks++
		}
		f.ownCheck[q] = c
	}
	n := 0
	for _, b := range f.pending {
		if b.arrives.After(t) {
			f.pending[n] = b
			n++
			continue
		}
		for q := range f.last {
			if f.d.PerProcess && q != b.proc {
				continue
			}
			if q == b.proc {
				f.inflight[q] = false
				if f.d.OwnBeatSamples && b.at.After(f.sampled[q]) {
					f.sampled[q] = b.at
				}
			} else if !f.d.SenderOnlySamples {
				f.sample(q, b.arrives)
			}
			if b.at.After(f.last[q]) {
				f.last[q] = b.at
			}
		}
	}
	f.pending = f.pending[:n]
	if t.Sub(f.last[proc]) < f.hb+f.extra[(proc+f.Use.FleetBeats)%len(f.extra)] || f.inflight[proc] {
		return
	}
	if f.d.SenderSamples {
		f.sample(proc, t)
	}
	if f.d.CheckEachBeat || f.d.CheckEvery > 0 && (f.checked.IsZero() || float64(t.Sub(f.checked)) >= f.d.CheckEvery*float64(f.hb)) {
		f.checked = t
		f.ownCheck[proc] = t
		f.Use.Checks++
	}
	f.Use.FleetBeats++
	f.inflight[proc] = true
	f.pending = append(f.pending, refDemandBeat{at: t, arrives: t.Add(f.delay), proc: proc})
}
