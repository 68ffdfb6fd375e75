package core

import (
	"sync"
	"sync/atomic"
	"time"
)

// cache is a bounded local cache of the records a Breaker last read or
// wrote. It has two uses:
//
//   - Decisions, only when Settings.CacheSize is set, and only for Allow: an
//     entry is served until CacheStaleness after it was read (on the
//     monotonic clock, so a wall-clock step cannot extend it) and never at
//     or past its RestrainedUntil, so a cached answer differs from the
//     store's only by what other workers wrote within the last
//     CacheStaleness, and a restraint's end (where a probe must be elected
//     in the store) is never served from cache.
//   - Write hints, always, on atomic stores: a write is first tried as a
//     compare-and-swap against the remembered version, which the store
//     validates, so a Failure after an Allow costs one round trip instead
//     of a read and a write. A stale hint only costs a conflict. A cached
//     record never decides a write: a "no write" decided on it is confirmed
//     by a store read.
//
// Entries are ordered by a sequence taken when a read starts or a write
// ends, so a read that started before this worker's own write cannot
// replace what the write stored: the cache never goes backwards.
type cache struct {
	mu    sync.RWMutex
	max   int
	stale time.Duration
	seq   atomic.Uint64
	m     map[string]cached
}

type cached struct {
	cur current
	// seq orders what this worker learnt of the key; gone marks knowledge
	// withdrawn (a write whose outcome is unknown) without losing its seq.
	seq  uint64
	gone bool
	// until is the monotonic instant the entry stops deciding; restrained
	// the record's RestrainedUntil (wall clock, like the Breaker's now).
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

// decides reports whether the cache may answer Allow (CacheSize set).
func (c *cache) decides() bool { return c.stale > 0 }

// begin returns the sequence of a read about to start or a write that has
// just ended.
func (c *cache) begin() uint64 { return c.seq.Add(1) }

// get returns host's cached record if it may still decide at now (wall) and
// mono (monotonic).
func (c *cache) get(host string, now, mono time.Time) (current, bool) {
	if c.stale == 0 {
		return current{}, false
	}
	c.mu.RLock()
	e, ok := c.m[host]
	c.mu.RUnlock()
	if !ok || e.gone || !mono.Before(e.until) {
		return current{}, false
	}
	if r := e.cur.rec.RestrainedUntil; !r.IsZero() && !now.Before(r) {
		return current{}, false
	}
	return e.cur, true
}

// hint returns host's last known record and version, however old.
func (c *cache) hint(host string) (current, bool) {
	c.mu.RLock()
	e, ok := c.m[host]
	c.mu.RUnlock()
	return e.cur, ok && !e.gone
}

// put caches what a read starting at seq, or a write ending at seq, found,
// unless the cache already knows something newer.
func (c *cache) put(host string, cur current, seq uint64, mono time.Time) {
	c.set(host, cached{cur: cur, seq: seq, until: mono.Add(c.stale)})
}

// forget withdraws host's entry: a write's outcome is unknown.
func (c *cache) forget(host string) {
	c.set(host, cached{seq: c.begin(), gone: true})
}

func (c *cache) set(host string, e cached) {
	if c.stale == 0 {
		// Hints only: skip the write lock when nothing would change
		// (the common closed-host read).
		c.mu.RLock()
		old, ok := c.m[host]
		c.mu.RUnlock()
		if ok && (old.seq > e.seq || (!old.gone && !e.gone && old.cur.ver == e.cur.ver)) {
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old, ok := c.m[host]
	if ok && old.seq > e.seq {
		return // newer knowledge wins
	}
	if !ok && len(c.m) >= c.max {
		// Evict an arbitrary entry (map order): cheap, and bounded.
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[host] = e
}
