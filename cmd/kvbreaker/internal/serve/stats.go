package serve

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/kvbreaker/kvbreaker"
)

// latencySamples is how many recent store calls the latency figures
// describe.
const latencySamples = 512

// Stats counts what the Breaker reports through its Observer, for the
// status page: decisions by kind, store calls and their latency, the
// mirror's health and lag, the clock offset. Give Observer() to the
// Breaker's Settings and the Stats to Config.
type Stats struct {
	mu          sync.Mutex
	decisions   map[string]uint64
	storeCalls  uint64
	storeErrors uint64
	latencies   []time.Duration // ring of the last latencySamples
	next        int
	mirror      *MirrorStatus
	offset      *kvbreaker.ClockOffset
}

// NewStats returns empty Stats; mirror says whether the Breaker follows
// its store (Settings.Mirror).
func NewStats(mirror bool) *Stats {
	s := &Stats{decisions: map[string]uint64{}}
	if mirror {
		s.mirror = &MirrorStatus{Reason: "starting"}
	}
	return s
}

// Observer is what the Breaker reports to.
func (s *Stats) Observer() *kvbreaker.Observer {
	return &kvbreaker.Observer{
		Decision: func(_ context.Context, e kvbreaker.DecisionInfo) {
			s.mu.Lock()
			s.decisions[e.Decision.String()]++
			s.mu.Unlock()
		},
		StoreCall: func(ctx context.Context, _ kvbreaker.StoreCallInfo) (context.Context, func(kvbreaker.StoreCallDoneInfo)) {
			start := time.Now()
			return ctx, func(d kvbreaker.StoreCallDoneInfo) {
				took := time.Since(start)
				s.mu.Lock()
				defer s.mu.Unlock()
				s.storeCalls++
				if d.Outcome != "ok" && d.Outcome != "not_found" && d.Outcome != "conflict" {
					s.storeErrors++
				}
				if len(s.latencies) < latencySamples {
					s.latencies = append(s.latencies, took)
				} else {
					s.latencies[s.next] = took
					s.next = (s.next + 1) % latencySamples
				}
			}
		},
		ClockOffset: func(_ context.Context, o kvbreaker.ClockOffset) {
			s.mu.Lock()
			s.offset = &o
			s.mu.Unlock()
		},
		Mirror: func(_ context.Context, e kvbreaker.MirrorInfo) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.mirror != nil {
				s.mirror.Healthy, s.mirror.Reason = e.Healthy, string(e.Reason)
			}
		},
		MirrorLag: func(_ context.Context, e kvbreaker.MirrorLagInfo) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.mirror != nil {
				s.mirror.LagMS = ptr(float64(e.Lag.Microseconds()) / 1000)
			}
		},
	}
}

// StoreStatus describes the store calls.
type StoreStatus struct {
	Calls  uint64 `json:"calls"`
	Errors uint64 `json:"errors"`
	// P50MS and P99MS are over the last 512 calls; null before any.
	P50MS *float64 `json:"p50_ms"`
	P99MS *float64 `json:"p99_ms"`
	// ClockOffsetMS is the store's clock minus this process's, ±
	// ClockUncertaintyMS; null until measured (or for a store that cannot
	// show its clock).
	ClockOffsetMS      *float64 `json:"clock_offset_ms"`
	ClockUncertaintyMS *float64 `json:"clock_uncertainty_ms"`
}

// MirrorStatus is the mirror's health (Settings.Mirror).
type MirrorStatus struct {
	Healthy bool   `json:"healthy"`
	Reason  string `json:"reason"`
	// LagMS is the last measured delay of the feed.
	LagMS *float64 `json:"lag_ms"`
}

// StatusResponse answers GET /v1/status: what the status page shows.
type StatusResponse struct {
	Now time.Time `json:"now"`
	// Circuits are the open and half-open ones (up to 1000 keys read).
	Circuits []Circuit `json:"circuits"`
	// Truncated: the store holds more keys than were read.
	Truncated bool `json:"truncated"`
	// Unlisted: the store cannot list its keys, so Circuits is empty.
	Unlisted bool `json:"unlisted"`
	// ReadOnly: the server is kvbreaker dashboard, which never writes.
	ReadOnly bool `json:"read_only"`
	// Decisions counts this process's decisions by kind since it started:
	// send, hold, probe, drop.
	Decisions map[string]uint64 `json:"decisions"`
	Store     StoreStatus       `json:"store"`
	// Mirror is null without a mirror.
	Mirror *MirrorStatus `json:"mirror"`
}

func ms(d time.Duration) *float64 { return ptr(float64(d.Microseconds()) / 1000) }

func (s *Stats) fill(out *StatusResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range []string{"send", "hold", "probe", "drop"} {
		out.Decisions[k] = s.decisions[k]
	}
	out.Store.Calls, out.Store.Errors = s.storeCalls, s.storeErrors
	if n := len(s.latencies); n > 0 {
		l := slices.Sorted(slices.Values(s.latencies))
		out.Store.P50MS, out.Store.P99MS = ms(l[n*50/100]), ms(l[n*99/100])
	}
	if s.offset != nil {
		out.Store.ClockOffsetMS, out.Store.ClockUncertaintyMS = ms(s.offset.Offset), ms(s.offset.Uncertainty)
	}
	if s.mirror != nil {
		m := *s.mirror
		out.Mirror = &m
	}
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	out := StatusResponse{Now: s.cfg.Clock().UTC(), Circuits: []Circuit{}, ReadOnly: s.cfg.ReadOnly, Decisions: map[string]uint64{"send": 0, "hold": 0, "probe": 0, "drop": 0}}
	page, err := s.circuits(r.Context(), "", kvbreaker.MaxListLimit, "")
	switch {
	case errors.Is(err, kvbreaker.ErrNoLister):
		out.Unlisted = true
	case err != nil:
		writeProblem(w, http.StatusServiceUnavailable, "store", "the store failed to list: "+*s.storeError("list", err))
		return
	default:
		for _, c := range page.Circuits {
			if c.State != "closed" {
				out.Circuits = append(out.Circuits, c)
			}
		}
		out.Truncated = page.NextCursor != nil
	}
	if s.cfg.Stats != nil {
		s.cfg.Stats.fill(&out)
	}
	writeJSON(w, http.StatusOK, out)
}
