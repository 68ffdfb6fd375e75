package serve

import (
	"crypto/rand"
	"sync"
	"time"

	"github.com/kvbreaker/kvbreaker"
)

// probeTable remembers the Probe verdicts given out, by an opaque id, so
// that a worker can abandon its probe (Breaker.Abandon needs the verdict
// itself). An entry lives for RecoveryDelay: after that another worker may
// take the probe over, and abandoning it would change nothing.
type probeTable struct {
	mu    sync.Mutex
	m     map[string]probeEntry
	ttl   time.Duration
	max   int
	clock func() time.Time
}

type probeEntry struct {
	host    string
	v       kvbreaker.Verdict
	expires time.Time
}

func newProbeTable(ttl time.Duration, max int, clock func() time.Time) *probeTable {
	return &probeTable{m: map[string]probeEntry{}, ttl: ttl, max: max, clock: clock}
}

// add remembers v and returns its id, or "" when the table is full of
// probes still in time (the probe then cannot be abandoned, only answered
// or left to expire).
func (t *probeTable) add(host string, v kvbreaker.Verdict) string {
	now := t.clock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.m) >= t.max {
		for id, e := range t.m {
			if !now.Before(e.expires) {
				delete(t.m, id)
			}
		}
		if len(t.m) >= t.max {
			return ""
		}
	}
	id := rand.Text()
	t.m[id] = probeEntry{host: host, v: v, expires: now.Add(t.ttl)}
	return id
}

// take removes and returns the probe id names, if it is still in time.
func (t *probeTable) take(id string) (probeEntry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[id]
	if !ok {
		return e, false
	}
	delete(t.m, id)
	return e, t.clock().Before(e.expires)
}

// peek returns the probe id names without removing it.
func (t *probeTable) peek(id string) (probeEntry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[id]
	return e, ok && t.clock().Before(e.expires)
}
