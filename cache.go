package kvbreaker

import (
	"hash/maphash"
	"slices"
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
// replace what the write stored: the cache never goes backwards, not even
// across an eviction (a shard refuses a new entry older than anything it
// evicted).
//
// A delivery process cycles through thousands of hosts, so every operation
// is O(1) and no lock is shared by all hosts: a host's hash picks one of up
// to cacheShards shards, each with its own mutex and sequence, and within it
// one set of cacheWays slots (set-associative, like a CPU cache). A set's
// eight hashes share a cache line, so a lookup reads one line and the slot
// it finds; a new host takes an empty slot of its set or evicts by CLOCK
// (a hand that spares a slot used since it last passed). There is no map
// to grow, delete from or rehash, and memory is the slots, allocated a
// shard at a time as hosts arrive.
type cache struct {
	seed  maphash.Seed
	stale time.Duration
	mask  uint64 // shards - 1
	sets  uint64 // sets per shard
	ways  int    // slots used per set: cacheWays, or fewer for a tiny cache
	// shards allocate their sets on first use.
	shards []cacheShard
}

// cacheShards bounds the shards; minShardSlots keeps small caches (tests,
// CacheSize 100) in one shard.
const (
	cacheShards   = 64
	minShardSlots = 64
	cacheWays     = 8
)

type cacheShard struct {
	mu sync.Mutex
	// seq numbers what this shard learns; a host's sequences all come
	// from its one shard, which is the only order that matters.
	seq atomic.Uint64
	// floor is the highest sequence evicted: an entry not in the shard
	// and older than it may be older than what was evicted.
	floor uint64
	sets  []cacheSet
	_     [64]byte // keep neighbouring shards' locks off one cache line
}

type cacheSet struct {
	// hash of each slot's host; 0 marks an empty slot (hashes are odd).
	hash [cacheWays]uint64
	// used: bit i set when slot i was read or updated since the hand
	// last passed.
	used uint8
	hand uint8
	slot [cacheWays]cacheSlot
}

type cacheSlot struct {
	host string
	e    cached
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

// hintSize bounds the hints kept when the decision cache is off. A hint
// saves a Failure's read only if it survives from the Allow to the
// delivery's outcome, while the process asks about other hosts: 16,384
// covers a 10,000-host mix (about 2 MB of slots when full, allocated a
// shard at a time).
const hintSize = 16384

func newCache(size int, stale time.Duration) *cache {
	if size <= 0 {
		size, stale = hintSize, 0
	}
	n := 1
	for n < cacheShards && size/(2*n) >= minShardSlots {
		n *= 2
	}
	// Rounded down: never more than size entries in all.
	per := size / n
	c := &cache{seed: maphash.MakeSeed(), stale: stale, mask: uint64(n - 1), ways: cacheWays,
		sets: uint64(per / cacheWays), shards: make([]cacheShard, n)}
	if c.sets == 0 {
		c.sets, c.ways = 1, per
	}
	return c
}

// slotRef is where a host lives: its shard, set and hash, computed once
// per call.
type slotRef struct {
	sh   *cacheShard
	hash uint64
	set  uint64
}

// ref hashes host once for the whole call.
func (c *cache) ref(host string) slotRef {
	h := maphash.String(c.seed, host) | 1
	return slotRef{sh: &c.shards[h>>1&c.mask], hash: h, set: (h >> 7) % c.sets}
}

// decides reports whether the cache may answer Allow (CacheSize set).
func (c *cache) decides() bool { return c.stale > 0 }

// begin returns the sequence of a read about to start or a write that has
// just ended.
func (r slotRef) begin() uint64 { return r.sh.seq.Add(1) }

// find returns host's slot index in its set, or -1. Called with the lock
// held; set is nil until the shard's first entry.
func (c *cache) find(r slotRef, host string) (*cacheSet, int) {
	if r.sh.sets == nil {
		return nil, -1
	}
	set := &r.sh.sets[r.set]
	for i := range c.ways {
		if set.hash[i] == r.hash && set.slot[i].host == host {
			return set, i
		}
	}
	return set, -1
}

// load returns host's entry, marking it used.
func (c *cache) load(r slotRef, host string) (cached, bool) {
	r.sh.mu.Lock()
	set, i := c.find(r, host)
	if i < 0 {
		r.sh.mu.Unlock()
		return cached{}, false
	}
	set.used |= 1 << i
	e := set.slot[i].e
	r.sh.mu.Unlock()
	return e, true
}

// get returns host's cached record if it may still decide at now (wall) and
// mono (monotonic).
func (c *cache) get(r slotRef, host string, now, mono time.Time) (current, bool) {
	if c.stale == 0 {
		return current{}, false
	}
	e, ok := c.load(r, host)
	if !ok || e.gone || !mono.Before(e.until) {
		return current{}, false
	}
	if rs := e.cur.rec.RestrainedUntil; !rs.IsZero() && !now.Before(rs) {
		return current{}, false
	}
	return e.cur, true
}

// hint returns host's last known record and version, however old.
func (c *cache) hint(r slotRef, host string) (current, bool) {
	e, ok := c.load(r, host)
	return e.cur, ok && !e.gone
}

// put caches what a read starting at seq, or a write ending at seq, found,
// unless the cache already knows something newer.
func (c *cache) put(r slotRef, host string, cur current, seq uint64, mono time.Time) {
	e := cached{cur: cur, seq: seq}
	if c.stale > 0 {
		e.until = mono.Add(c.stale)
	}
	c.set(r, host, e)
}

// forget withdraws host's entry: a write's outcome is unknown.
func (c *cache) forget(r slotRef, host string) {
	c.set(r, host, cached{seq: r.begin(), gone: true})
}

func (c *cache) set(r slotRef, host string, e cached) {
	sh := r.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.sets == nil {
		sh.sets = make([]cacheSet, c.sets)
	}
	set, i := c.find(r, host)
	if i >= 0 {
		old := &set.slot[i].e
		switch {
		case old.seq > e.seq:
			return // newer knowledge wins
		case c.stale == 0 && !old.gone && !e.gone && old.cur.ver == e.cur.ver:
			// Hints only, and the hint is unchanged (the common closed
			// host read): leave the slot's cache lines unwritten, so other
			// cores keep their copies.
			if set.used&(1<<i) == 0 {
				set.used |= 1 << i
			}
			return
		}
		*old = e
		set.used |= 1 << i
		return
	}
	if e.seq < sh.floor {
		// The host's entry may have been evicted after this knowledge was
		// superseded; caching it could go backwards.
		return
	}
	i = slices.Index(set.hash[:c.ways], 0)
	if i < 0 {
		// Full: CLOCK over the set, at most one lap past used slots.
		for set.used&(1<<set.hand) != 0 {
			set.used &^= 1 << set.hand
			set.hand = uint8((int(set.hand) + 1) % c.ways)
		}
		i = int(set.hand)
		set.hand = uint8((i + 1) % c.ways)
		sh.floor = max(sh.floor, set.slot[i].e.seq)
	}
	set.hash[i] = r.hash
	set.slot[i] = cacheSlot{host: host, e: e}
	set.used &^= 1 << i
}

// len returns the entries held, tombstones included.
func (c *cache) len() int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		for j := range sh.sets {
			for _, h := range sh.sets[j].hash[:c.ways] {
				if h != 0 {
					n++
				}
			}
		}
		sh.mu.Unlock()
	}
	return n
}
