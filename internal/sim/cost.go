package sim

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kvbreaker/kvbreaker/internal/model"
)

// fillCost copies md's store requests into rep.
func (r *runner) fillCost(rep *ModelReport, md model.Model) {
	c, ok := md.(model.Coster)
	if !ok {
		return
	}
	cost := c.Cost()
	rep.StoreReads, rep.StoreWrites, rep.EtcdLeaseGrants = cost.Reads, cost.Writes, cost.LeaseGrants
	rep.RequestsPer1000Deliveries = per1000(cost.Requests(), r.delivered)
	if k, ok := md.(*model.Kvbreaker); ok && rep.Cache != nil {
		st := k.Staleness()
		rep.Cache.Served, rep.Cache.StaleDecisions = st.Served, st.Decisions
		rep.Cache.MaxStaleAgeMS = float64(st.MaxAge.Microseconds()) / 1000
	}
	if k, ok := md.(*model.Kvbreaker); ok && rep.Mirror != nil {
		st, m := k.Staleness(), rep.Mirror
		m.Served, m.StaleDecisions, m.StaleRetries, m.StaleOutcomes = st.Served, st.Decisions, st.Retries, st.Outcomes
		m.MaxLagMS = float64(st.MaxAge.Microseconds()) / 1000
		m.FeedReads = cost.FeedReads
		m.RequestsPer1000DeliveriesNoFeedReads = per1000(cost.Requests()-cost.FeedReads, r.delivered)
		m.Feeds = r.feedReports(cost, k.Writes())
	}
}

func per1000(requests, deliveries int) float64 {
	if deliveries == 0 {
		return 0
	}
	return 1000 * float64(requests) / float64(deliveries)
}

// gobreaker's DistributedCircuitBreaker (github.com/sony/gobreaker/v2
// v2.4.0, distributed_gobreaker.go) keeps a breaker's whole state in one
// shared record and runs every Execute as GetData, Lock, the request, then
// SetData and Unlock (the deferred unlock), whatever the state: an open
// breaker still locks, writes and unlocks to answer ErrOpenState. Lock
// retries every 500 ms (mutexWaitTime) for 5 s (mutexTimeout), one request
// per attempt, and the lock is held while the request runs.
const (
	gobLockWait    = 500 // ms
	gobLockTimeout = 5000
)

// gobCost costs gobreaker's distributed breaker, one breaker per host, on
// the reference's calls: every decision (not drops) is one Execute, its
// outcome part of the same call. It decides nothing itself (its open state
// rejects where fedify's schedule holds, and the application's retries are
// its own); lock waits are counted, not simulated (the delivery is not
// delayed). Lock attempts are counted at gobreaker's own 500 ms cadence: a
// lower bound, since a SharedDataStore's Lock may retry inside one call
// (the redsync mutex behind gobreaker's v2/redis store does).
type gobCost struct {
	reads, writes, lockRetries int
}

// execute counts one Execute at host h at now (ms).
func (g *gobCost) execute(h *host, now int64) {
	g.reads++ // GetData
	failed := 0
	if wait := h.lockUntil - now; wait > 0 {
		failed = int(min((wait+gobLockWait-1)/gobLockWait, gobLockTimeout/gobLockWait))
	}
	g.writes += failed
	g.lockRetries += failed
	if failed == gobLockTimeout/gobLockWait {
		return // lock timeout: Execute returns Lock's error
	}
	g.writes += 3 // Lock, SetData, Unlock
}

func (g *gobCost) report(deliveries int) ModelReport {
	return ModelReport{
		Model: "gobreaker-distributed", CostOnly: true,
		StoreReads: g.reads, StoreWrites: g.writes, LockRetries: g.lockRetries,
		RequestsPer1000Deliveries: per1000(g.reads+g.writes, deliveries),
	}
}

// popularity names s's host popularity: "uniform" or "zipf:S".
func (s Scenario) popularity() string {
	if s.Zipf > 0 {
		return "zipf:" + strconv.FormatFloat(s.Zipf, 'g', -1, 64)
	}
	return "uniform"
}

// ParsePopularity reads "uniform" (0) or "zipf" / "zipf:S" (exponent S,
// default 1) into Scenario.Zipf.
func ParsePopularity(v string) (float64, error) {
	switch {
	case v == "uniform":
		return 0, nil
	case v == "zipf":
		return 1, nil
	}
	if rest, ok := strings.CutPrefix(v, "zipf:"); ok {
		f, err := strconv.ParseFloat(rest, 64)
		if err != nil || !(f > 0) || f > 4 {
			return 0, fmt.Errorf("popularity %q: the Zipf exponent must be a number above 0 and at most 4", v)
		}
		return f, nil
	}
	return 0, fmt.Errorf("popularity %q: want uniform, zipf or zipf:S (S the exponent, e.g. zipf:1.2)", v)
}
