package core

import (
	"sync"
	"time"
)

// cache is a bounded local cache of records, off unless Settings.CacheSize
// is set. An entry is served until min(read + CacheStaleness,
// RestrainedUntil): so a cached answer differs from the store's only by what
// other workers wrote within the last CacheStaleness, and a restraint's end
// (where a probe must be elected in the store) is never served from cache.
type cache struct {
	mu    sync.Mutex
	max   int
	stale time.Duration
	m     map[string]cached
}

type cached struct {
	cur   current
	until time.Time
}

func newCache(size int, stale time.Duration) *cache {
	if size <= 0 {
		return nil
	}
	return &cache{max: size, stale: stale, m: make(map[string]cached, min(size, 1024))}
}

// get returns host's cached record if it may still be served at now.
func (c *cache) get(host string, now time.Time) (current, bool) {
	if c == nil {
		return current{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[host]
	if !ok || !now.Before(e.until) {
		return current{}, false
	}
	return e.cur, true
}

// put caches what was read or written at now.
func (c *cache) put(host string, cur current, now time.Time) {
	if c == nil {
		return
	}
	until := now.Add(c.stale)
	if r := cur.rec.RestrainedUntil; !r.IsZero() && r.Before(until) {
		until = r
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
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, host)
}
