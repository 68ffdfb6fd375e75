package core

import (
	"sync"
	"time"
)

// cache is a bounded local cache of the records a Breaker last read or
// wrote. It has two uses:
//
//   - Decisions, only when Settings.CacheSize is set: an entry is served
//     until min(read + CacheStaleness, RestrainedUntil), so a cached answer
//     differs from the store's only by what other workers wrote within the
//     last CacheStaleness, and a restraint's end (where a probe must be
//     elected in the store) is never served from cache.
//   - Write hints, always, on atomic stores: a write is first tried as a
//     compare-and-swap against the remembered version, which the store
//     validates, so a Failure after an Allow costs one round trip instead
//     of a read and a write. A stale hint only costs a conflict.
type cache struct {
	mu    sync.RWMutex
	max   int
	stale time.Duration
	m     map[string]cached
}

type cached struct {
	cur   current
	until time.Time
}

// hintSize bounds the hints kept when the decision cache is off.
const hintSize = 4096

func newCache(size int, stale time.Duration) *cache {
	if size <= 0 {
		size, stale = hintSize, 0
	}
	return &cache{max: size, stale: stale, m: make(map[string]cached, min(size, 1024))}
}

// get returns host's cached record if it may still be served at now.
func (c *cache) get(host string, now time.Time) (current, bool) {
	if c.stale == 0 {
		return current{}, false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.m[host]
	if !ok || !now.Before(e.until) {
		return current{}, false
	}
	return e.cur, true
}

// hint returns host's last known record and version, however old.
func (c *cache) hint(host string) (current, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.m[host]
	return e.cur, ok
}

// put caches what was read or written at now.
func (c *cache) put(host string, cur current, now time.Time) {
	until := now.Add(c.stale)
	if r := cur.rec.RestrainedUntil; !r.IsZero() && r.Before(until) {
		until = r
	}
	if c.stale == 0 {
		// Hints only: skip the write when the version is already known
		// (the common closed-host read).
		c.mu.RLock()
		e, ok := c.m[host]
		c.mu.RUnlock()
		if ok && e.cur.ver == cur.ver {
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[host]; !ok && len(c.m) >= c.max {
		// Evict an arbitrary entry (map order): cheap, and bounded.
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[host] = cached{cur: cur, until: until}
}

func (c *cache) forget(host string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, host)
}
