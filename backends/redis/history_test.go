package redis_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvbreaker/kvbreaker"
)

// call is one Breaker call as the failover tests record it: the worker,
// the operation and host, the fleet-clock instant it was given, its start
// and end in real time, and its outcome (an Allow's decision, an error).
// The shape is the one a robustness harness records, so these histories
// can move onto it.
type call struct {
	Worker     int
	Op         string // "allow", "failure", "success"
	Host       string
	Start, End time.Time
	Decision   kvbreaker.Decision // allow only
	Err        error
}

func (c call) String() string {
	out := "ok"
	if c.Op == "allow" {
		out = c.Decision.String()
	}
	if c.Err != nil {
		out += " err=" + c.Err.Error()
	}
	return fmt.Sprintf("w%d %s %s [%s +%v] %s", c.Worker, c.Op, c.Host, c.Start.Format("15:04:05.000"), c.End.Sub(c.Start).Round(time.Millisecond), out)
}

// history collects calls from concurrent workers.
type history struct {
	mu    sync.Mutex
	calls []call
}

func (h *history) add(c call) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, c)
}

// all returns the calls in the order they started.
func (h *history) all() []call {
	h.mu.Lock()
	defer h.mu.Unlock()
	cs := slices.Clone(h.calls)
	slices.SortStableFunc(cs, func(a, b call) int { return a.Start.Compare(b.Start) })
	return cs
}

// uniqueClock hands out a distinct millisecond on every read, so no two
// failures a fleet records share an instant and a record's failures can be
// counted against the calls.
type uniqueClock struct{ ns atomic.Int64 }

func newUniqueClock() *uniqueClock {
	c := &uniqueClock{}
	c.ns.Store(time.Now().Truncate(time.Millisecond).UnixNano())
	return c
}

func (c *uniqueClock) Now() time.Time { return time.Unix(0, c.ns.Add(int64(time.Millisecond))) }

// Set moves the clock so its next read is just after t.
func (c *uniqueClock) Set(t time.Time) { c.ns.Store(t.UnixNano()) }

// checkOneProbe returns a violation of "at most one probe per restraint":
// two Allows on a host answered Probe with no Success or Failure on the
// host between them (every call here is one restraint's election: the
// tests move the clock to a restraint's end once).
func checkOneProbe(calls []call) []string {
	var bad []string
	probed := map[string]call{}
	for _, c := range calls {
		switch {
		case c.Op == "allow" && c.Err == nil && c.Decision == kvbreaker.Probe:
			if p, ok := probed[c.Host]; ok {
				bad = append(bad, fmt.Sprintf("at most one probe per restraint: %s probed twice: %v, then %v", c.Host, p, c))
			}
			probed[c.Host] = c
		case c.Op == "failure" || c.Op == "success":
			delete(probed, c.Host)
		}
	}
	return bad
}

// checkCallTime returns the calls that took longer than limit.
func checkCallTime(calls []call, limit time.Duration) []string {
	var bad []string
	for _, c := range calls {
		if d := c.End.Sub(c.Start); d > limit {
			bad = append(bad, fmt.Sprintf("no call longer than CallTimeout plus slack (%v): %v", limit, c))
		}
	}
	return bad
}
