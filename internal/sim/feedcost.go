package sim

import (
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
}

// feedHeartbeat is the heartbeat a Breaker's mirror asks of its feed: a
// quarter of MirrorStaleness (mirror.heartbeat), at the default.
var feedHeartbeat = kvbreaker.Settings{}.WithDefaults().MirrorStaleness / 4

// demandHeartbeat is the heartbeat a Breaker's mirror asks of a feed that
// beats on demand: three quarters of MirrorStaleness (mirror.heartbeat),
// at the default.
var demandHeartbeat = kvbreaker.Settings{}.WithDefaults().MirrorStaleness * 3 / 4

// feedCall counts the call of r.proc at now for the feeds that beat on
// demand.
func (r *runner) feedCall(now time.Time) {
	if r.demand == nil {
		r.demand = map[string]*model.DemandFleet{}
		for _, name := range model.FeedStores {
			if fm := model.FeedModels[name]; fm.Demand != nil {
				r.demand[name] = model.NewDemandFleet(fm, r.s.Processes, demandHeartbeat, r.s.mirrorDelay(), Epoch)
			}
		}
	}
	for _, f := range r.demand {
		f.Call(r.proc, now)
	}
}

// feedReports costs the mirror's fleet on each store that follows.
func (r *runner) feedReports(cost model.Cost) []FeedReport {
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
			fleet = model.NewDemandFleet(fm, r.s.Processes, hb, r.s.mirrorDelay(), Epoch).Use
			if f := r.demand[name]; f != nil {
				fleet = f.Use
			}
			session = fm.Total(model.FeedUse{Sessions: fleet.Sessions, Pages: fleet.Pages, Keys: fleet.Keys})
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
			}
		}
	}
}
