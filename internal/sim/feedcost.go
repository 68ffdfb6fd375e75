package sim

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/internal/model"
)

// FeedReport is what kvbreaker+mirror's fleet costs on one store, its
// feeds' own requests counted (model.FeedModels, held to a real server's
// count by each backend's TestFollowRequestsCounted): each process's feed
// opens one session, whose snapshot finds the store empty, and beats at
// the heartbeat the mirror asks for (a quarter of the default
// MirrorStaleness) for the whole traffic, Scenario.Duration; a feed that
// beats on demand (model.FeedModel.Demand) beats once per session on its
// own, then as model.DemandFleet counts over every call the scenario made,
// at three quarters of it.
type FeedReport struct {
	Store       string `json:"store"`
	HeartbeatMS int64  `json:"heartbeat_ms"`
	// FleetBeats, Checks and Samples are a feed on demand's beats, wipe
	// checks and clock samples, the whole fleet's (0 on the others).
	FleetBeats int `json:"fleet_beats,omitempty"`
	Checks     int `json:"checks,omitempty"`
	Samples    int `json:"samples,omitempty"`
	// SessionRequests are the feeds' sessions' and snapshots'; BeatRequests
	// their heartbeats'; FeedReads, on a feed of invalidations, the reads
	// of a key the feed said changed (MirrorReport.FeedReads; 0 on a feed
	// of values); BreakerRequests the Breakers' own reads and writes.
	SessionRequests int `json:"session_requests"`
	BeatRequests    int `json:"beat_requests"`
	FeedReads       int `json:"feed_reads"`
	BreakerRequests int `json:"breaker_requests"`
	// Requests is their sum, RequestsPer1000Deliveries per 1,000
	// deliveries, RatioToFedify that over fedify-model's in the same run.
	Requests                  int     `json:"requests"`
	RequestsPer1000Deliveries float64 `json:"requests_per_1000_deliveries"`
	RatioToFedify             float64 `json:"ratio_to_fedify"`
	// BeatRequestsPerSecond is what the whole fleet's beats cost each
	// second, whatever the traffic.
	BeatRequestsPerSecond float64 `json:"beat_requests_per_second"`
	// PerKind is RequestsPer1000Deliveries by kind of request.
	PerKind FeedKinds `json:"per_kind"`
	// WhatIf costs, on the same calls and writes, feeds that do not
	// exist (yet): what each change would cut (a store whose fleet
	// shares its beats only).
	WhatIf []FeedWhatIf `json:"what_if,omitempty"`
}

// FeedKinds is a store's requests per 1,000 deliveries by kind: the
// Breakers' writes that changed the store and those that lost (a
// conflict), the reads after a Stale (and of them those after the
// process's own writes only), the feeds' beats, wipe checks, clock
// samples, and sessions with their snapshots. They sum to
// RequestsPer1000Deliveries.
type FeedKinds struct {
	Writes       float64 `json:"writes"`
	LostWrites   float64 `json:"lost_writes"`
	BreakerReads float64 `json:"breaker_reads"`
	FeedReads    float64 `json:"feed_reads"`
	FeedReadsOwn float64 `json:"feed_reads_own"`
	Beats        float64 `json:"beats"`
	Checks       float64 `json:"checks"`
	Samples      float64 `json:"samples"`
	Sessions     float64 `json:"sessions"`
}

// FeedWhatIf is the cost of a feed changed as Name says, on the same
// calls and writes.
type FeedWhatIf struct {
	Name                      string  `json:"name"`
	Requests                  int     `json:"requests"`
	RequestsPer1000Deliveries float64 `json:"requests_per_1000_deliveries"`
	RatioToFedify             float64 `json:"ratio_to_fedify"`
}

// feedHeartbeat is the heartbeat a Breaker's mirror asks of its feed: a
// quarter of MirrorStaleness (mirror.heartbeat), at the default.
var feedHeartbeat = kvbreaker.Settings{}.WithDefaults().MirrorStaleness / 4

// demandHeartbeat is the heartbeat a Breaker's mirror asks of a feed that
// beats on demand: three quarters of MirrorStaleness (mirror.heartbeat),
// at the default.
var demandHeartbeat = defaultMirrorStaleness * 3 / 4

var defaultMirrorStaleness = kvbreaker.Settings{}.WithDefaults().MirrorStaleness

// feedCall keeps the call of r.proc, now, for the feeds that beat on
// demand: kvbreaker+mirror's fleet is costed on them once the run is over
// (feedReports), every feed and what-if on its own core, rather than on
// the runner's, which the models keep busy.
func (r *runner) feedCall() {
	if r.s.noMirror || r.replay {
		return // no kvbreaker+mirror: nothing to cost
	}
	// In chunks: a million calls appended to one slice would be copied
	// over and over as it grows.
	if n := len(r.calls); n == 0 || len(r.calls[n-1]) == cap(r.calls[n-1]) {
		r.calls = append(r.calls, make([]procCall, 0, callChunk))
	}
	last := &r.calls[len(r.calls)-1]
	*last = append(*last, procCall{proc: r.proc, at: time.Duration(r.now) * time.Millisecond})
}

// callChunk is how many calls a chunk of runner.calls holds.
const callChunk = 1 << 16

// procCall is a call of a process, at its instant since Epoch.
type procCall struct {
	proc int
	at   time.Duration
}

// demandRun is one fleet of feeds on demand, costed on every call the
// run made (and, with commits, its writes dating the feeds).
type demandRun struct {
	fm        model.FeedModel
	heartbeat time.Duration
	commits   bool
	use       model.FeedUse
}

// runDemand costs each of runs, on as many goroutines as cores: each run
// is a model.DemandFleet of its own over the same calls, so the order
// they run in changes nothing.
func (r *runner) runDemand(runs []*demandRun, writes []model.Write) {
	at := make([]time.Duration, len(writes))
	for i, w := range writes {
		at[i] = w.At.Sub(Epoch)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(runs)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(runs) {
					return
				}
				d := runs[i]
				f := model.NewDemandFleet(d.fm, r.s.Processes, d.heartbeat, r.s.mirrorDelay(), Epoch)
				wi := 0
				for _, chunk := range r.calls {
					for _, c := range chunk {
						for d.commits && wi < len(at) && at[wi] < c.at {
							f.CommitAfter(at[wi])
							wi++
						}
						f.CallAfter(c.proc, c.at)
					}
				}
				d.use = f.Use
			}
		})
	}
	wg.Wait()
}

// whatIf is a change to a feed on demand, costed by replaying the calls
// (and writes) through a model.DemandFleet.
type whatIf struct {
	name string
	// heartbeat the mirror would ask for.
	heartbeat time.Duration
	// writesDate: every change carries the server's clock and dates the
	// feeds as a beat does (model.DemandFleet.Commit).
	writesDate bool
	// ownReadsSkipped: a change names the version written, so a mirror
	// holding it (its own write) reads nothing.
	ownReadsSkipped bool
	// values: a change carries the record, so no read follows a Stale
	// (a feed of values).
	values bool
	// only: the stores it applies to (nil: every store whose fleet
	// shares its beats).
	only []string
}

var whatIfs = []whatIf{
	{name: "asked at 7/8 of MirrorStaleness", heartbeat: defaultMirrorStaleness * 7 / 8},
	{name: "own writes' Stale not read (the version in each change)", heartbeat: demandHeartbeat, ownReadsSkipped: true},
	{name: "the record in each change (no read after a Stale)", heartbeat: demandHeartbeat, values: true, only: []string{"postgres"}},
	{name: "every change dated by the server (a beat)", heartbeat: demandHeartbeat, writesDate: true, only: []string{"postgres"}},
	{name: "the first, third and fourth together", heartbeat: defaultMirrorStaleness * 7 / 8, writesDate: true, values: true, only: []string{"postgres"}},
	{name: "the first two together", heartbeat: defaultMirrorStaleness * 7 / 8, ownReadsSkipped: true, only: []string{"redis"}},
	{name: "MirrorStaleness 2 s (a setting)", heartbeat: 2 * defaultMirrorStaleness * 3 / 4},
}

// whatIfRuns returns the runs of each what-if of store's feed whose
// fleet shares beats, in whatIfs' order (nil for one that does not
// apply), for whatIfs to cost once run.
func whatIfRuns(store string, fm model.FeedModel) []*demandRun {
	out := make([]*demandRun, len(whatIfs))
	for i, w := range whatIfs {
		if fm.Demand == nil || fm.Demand.PerProcess || w.only != nil && !slices.Contains(w.only, store) {
			continue
		}
		out[i] = &demandRun{fm: fm, heartbeat: w.heartbeat, commits: w.writesDate}
	}
	return out
}

// whatIfs costs each what-if of store's feed, run (whatIfRuns).
func (r *runner) whatIfs(runs []*demandRun, cost model.Cost) []FeedWhatIf {
	var out []FeedWhatIf
	for i, w := range whatIfs {
		d := runs[i]
		if d == nil {
			continue
		}
		fm := d.fm
		// d.use holds the sessions; cost the Breakers' requests and the
		// reads after a Stale.
		n := fm.Total(d.use) + cost.Requests()
		if !fm.Invalidations || w.values {
			n -= cost.FeedReads
		} else if w.ownReadsSkipped {
			n -= cost.FeedReadsOwn
		}
		out = append(out, FeedWhatIf{Name: w.name, Requests: n, RequestsPer1000Deliveries: per1000(n, r.delivered)})
	}
	return out
}

// feedReports costs the mirror's fleet on each store that follows.
func (r *runner) feedReports(cost model.Cost, writes []model.Write) []FeedReport {
	// Every fleet on demand first, all at once: the store's own and its
	// what-ifs'.
	fleets := map[string]*demandRun{}
	what := map[string][]*demandRun{}
	var runs []*demandRun
	for _, name := range model.FeedStores {
		fm := model.FeedModels[name]
		if fm.Demand != nil {
			fleets[name] = &demandRun{fm: fm, heartbeat: demandHeartbeat}
			runs = append(runs, fleets[name])
		}
		what[name] = whatIfRuns(name, fm)
		for _, d := range what[name] {
			if d != nil {
				runs = append(runs, d)
			}
		}
	}
	r.runDemand(runs, writes)
	var out []FeedReport
	for _, name := range model.FeedStores {
		fm := model.FeedModels[name]
		u := fm.Run(feedHeartbeat, r.s.Duration, 0)
		beats := fm.PerBeat() * u.Beats * r.s.Processes
		session := (fm.Total(u) - fm.PerBeat()*u.Beats) * r.s.Processes
		hb := feedHeartbeat
		var fleet model.FeedUse
		if fm.Demand != nil {
			hb = demandHeartbeat
			fleet = fleets[name].use
			session = fm.Total(model.FeedUse{Sessions: fleet.Sessions, DemandSessions: fleet.DemandSessions, Pages: fleet.Pages, Keys: fleet.Keys})
			beats = fm.Total(fleet) - session
		}
		fr := FeedReport{
			Store: name, HeartbeatMS: hb.Milliseconds(),
			FleetBeats: fleet.FleetBeats, Checks: fleet.Checks, Samples: fleet.Samples,
			SessionRequests: session, BeatRequests: beats,
			BreakerRequests:       cost.Requests() - cost.FeedReads,
			BeatRequestsPerSecond: float64(beats) / r.s.Duration.Seconds(),
		}
		if fm.Invalidations {
			fr.FeedReads = cost.FeedReads
		}
		fr.Requests = fr.SessionRequests + fr.BeatRequests + fr.FeedReads + fr.BreakerRequests
		fr.RequestsPer1000Deliveries = per1000(fr.Requests, r.delivered)
		k := &fr.PerKind
		k.Writes = per1000(cost.Writes-cost.LostWrites, r.delivered)
		k.LostWrites = per1000(cost.LostWrites, r.delivered)
		k.BreakerReads = per1000(cost.Reads-cost.FeedReads, r.delivered)
		k.FeedReads = per1000(fr.FeedReads, r.delivered)
		if fm.Invalidations {
			k.FeedReadsOwn = per1000(cost.FeedReadsOwn, r.delivered)
		}
		k.Sessions = per1000(session, r.delivered)
		if fm.Demand != nil {
			k.Checks = per1000(fm.Total(model.FeedUse{Checks: fleet.Checks}), r.delivered)
			k.Samples = per1000(fm.Total(model.FeedUse{Samples: fleet.Samples}), r.delivered)
		}
		k.Beats = per1000(beats, r.delivered) - k.Checks - k.Samples
		fr.WhatIf = r.whatIfs(what[name], cost)
		out = append(out, fr)
	}
	return out
}

// feedRatios sets each feed report's ratio to the reference's requests.
func feedRatios(rep *Report) {
	if len(rep.Models) == 0 || rep.Models[0].RequestsPer1000Deliveries == 0 {
		return
	}
	ref := rep.Models[0].RequestsPer1000Deliveries
	for i := range rep.Models {
		if m := rep.Models[i].Mirror; m != nil {
			for j := range m.Feeds {
				m.Feeds[j].RatioToFedify = m.Feeds[j].RequestsPer1000Deliveries / ref
				for w := range m.Feeds[j].WhatIf {
					m.Feeds[j].WhatIf[w].RatioToFedify = m.Feeds[j].WhatIf[w].RequestsPer1000Deliveries / ref
				}
			}
		}
	}
}
