package kvbreaker

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
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
//     by a store read. Without a hint a write guesses "absent", so hints
//     of absent records are not kept: only the few hosts that have a
//     record take slots.
//
// Entries are ordered by a sequence: a write that ends increments its
// shard's, a read that starts takes its current value. So a read that
// started before this worker's own write ended cannot replace what the
// write stored: the cache never goes backwards, not even across an eviction
// (a shard refuses a new entry older than anything it evicted).
//
// A closed host's Allow, the hot path, writes no memory another core reads:
// the read takes the sequence with a load, and a hint that is already
// there, unchanged, is recognised from atomic fields without the shard's
// lock. Cores asking about thousands of hosts then share the lines they
// read instead of passing them back and forth.
//
// A delivery process cycles through thousands of hosts, so every operation
// is O(1) and no lock is shared by all hosts: a host's hash picks one of up
// to cacheShards shards, each with its own mutex and sequence, and within it
// one set of cacheWays slots (set-associative, like a CPU cache). A set's
// eight hashes share a cache line, so a lookup reads one line and the slot
// it finds; a new host takes an empty slot of its set or evicts by CLOCK
// (a hand that spares a slot used since it last passed). There is no map
// to grow, delete from or rehash, and memory is the slots, allocated a set
// at a time as hosts that have a record arrive: a process whose few hosts
// with a record are spread over every shard holds their sets, not the
// whole bound (a hints-only cache's 16,384 slots would be megabytes per
// Breaker, most of them never used).
type cache struct {
	seed maphash.Seed
	// check seeds a second hash of the host, which with the first
	// identifies it (128 bits) where the decision cache reads without
	// the lock and so cannot compare host names.
	check maphash.Seed
	// base is the monotonic origin of decision.until.
	base  time.Time
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
	// sets is allocated on the shard's first entry, and each set on its
	// own first entry; both read without the lock by the unchanged-hint
	// check and the decision cache.
	sets atomic.Pointer[[]atomic.Pointer[cacheSet]]
	_    [64]byte // keep neighbouring shards' locks off one cache line
}

// cacheSet is one set of slots. hash, tag and used are written under the
// shard's lock and read without it by the unchanged-hint check; the rest
// only under the lock.
type cacheSet struct {
	// hash of each slot's host; 0 marks an empty slot (hashes are odd).
	hash [cacheWays]atomic.Uint64
	// tag of each slot: hintTag of its version for a known record (not
	// withdrawn), 0 otherwise.
	tag [cacheWays]atomic.Uint64
	// used: bit i set when slot i was read or updated since the hand
	// last passed.
	used atomic.Uint32
	hand uint8
	slot [cacheWays]cacheSlot
	// dec is what the decision cache needs of each slot, readable without
	// the lock; nil when the cache only keeps hints.
	dec *[cacheWays]decision
}

// decision is a slot's entry as the decision cache reads it without the
// shard's lock: a seqlock of atomic words (seq is odd while a writer,
// holding the lock, updates them; a reader that sees it odd or changed
// treats the slot as a miss).
type decision struct {
	seq   atomic.Uint64
	check atomic.Uint64 // the host's second hash
	ver   atomic.Uint64
	until atomic.Int64  // monotonic ns since cache.base the entry decides until; 0: it does not
	restr atomic.Int64  // RestrainedUntil, Unix ms, when flags has restrained
	flags atomic.Uint32 // decRestrained, decProbing
}

const (
	decRestrained = 1 << iota
	decProbing
)

// store publishes e; the shard's lock is held.
func (d *decision) store(c *cache, check uint64, e cached) {
	d.seq.Add(1)
	d.check.Store(check)
	d.ver.Store(uint64(e.cur.ver))
	var until int64
	// A paced release decides a held message on the record's release
	// fields, which a decision does not keep: such a record is read.
	if !e.gone && !e.until.IsZero() && e.cur.rec.Released.IsZero() {
		until = max(int64(e.until.Sub(c.base)), 1)
	}
	d.until.Store(until)
	var flags uint32
	if rs := e.cur.rec.RestrainedUntil; !rs.IsZero() {
		flags |= decRestrained
		d.restr.Store(rs.UnixMilli())
	}
	if e.cur.rec.Probing {
		flags |= decProbing
	}
	d.flags.Store(flags)
	d.seq.Add(1)
}

// load returns the entry if it was not being written meanwhile.
func (d *decision) load() (check uint64, cur current, until int64, ok bool) {
	s := d.seq.Load()
	if s&1 != 0 {
		return 0, current{}, 0, false
	}
	check, until = d.check.Load(), d.until.Load()
	cur.ver = driver.Version(d.ver.Load())
	flags, restr := d.flags.Load(), d.restr.Load()
	if d.seq.Load() != s {
		return 0, current{}, 0, false
	}
	if flags&decRestrained != 0 {
		cur.rec.RestrainedUntil = time.UnixMilli(restr).UTC() // as the codec decodes it
	}
	cur.rec.Probing = flags&decProbing != 0
	return check, cur, until, true
}

// hintTag is a slot's tag for version v: never 0.
func hintTag(v driver.Version) uint64 { return uint64(v)<<1 | 1 }

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
// covers a 10,000-host mix (about 3 MB of slots when full, allocated a
// set of 8 slots, 1.5 KB, at a time: only hosts with a record take them).
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
	c := &cache{seed: maphash.MakeSeed(), check: maphash.MakeSeed(), base: time.Now(), stale: stale, mask: uint64(n - 1), ways: cacheWays,
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

// begin returns the sequence of a write that has just ended.
func (r slotRef) begin() uint64 { return r.sh.seq.Add(1) }

// reading returns the sequence of a read about to start: what the shard
// has learnt so far, without writing.
func (r slotRef) reading() uint64 { return r.sh.seq.Load() }

// setOf returns r's set, nil until the set's first entry.
func (r slotRef) setOf() *cacheSet {
	sets := r.sh.sets.Load()
	if sets == nil {
		return nil
	}
	return (*sets)[r.set].Load()
}

// newSet allocates a set, with the decision words when the cache decides.
func (c *cache) newSet() *cacheSet {
	if c.stale == 0 {
		return new(cacheSet)
	}
	// One allocation: the set points into it.
	x := new(struct {
		set cacheSet
		dec [cacheWays]decision
	})
	x.set.dec = &x.dec
	return &x.set
}

// find returns host's slot index in its set, or -1. Called with the lock
// held; set is nil until the set's first entry.
func (c *cache) find(r slotRef, host string) (*cacheSet, int) {
	set := r.setOf()
	if set == nil {
		return nil, -1
	}
	for i := range c.ways {
		if set.hash[i].Load() == r.hash && set.slot[i].host == host {
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
	set.markUsed(i)
	e := set.slot[i].e
	r.sh.mu.Unlock()
	return e, true
}

// get returns host's cached record if it may still decide at now (wall) and
// mono (monotonic). It takes no lock and writes nothing (but a used bit the
// CLOCK hand cleared), so cores deciding for many hosts do not pass cache
// lines between them. The record served has what an Allow decides on (its
// restraint and probe flag), not its failures, which only writes need and
// which writes never take from here.
func (c *cache) get(r slotRef, host string, now, mono time.Time) (current, bool) {
	if c.stale == 0 {
		return current{}, false
	}
	set := r.setOf()
	if set == nil {
		return current{}, false
	}
	check := maphash.String(c.check, host)
	at := int64(mono.Sub(c.base))
	for i := range c.ways {
		if set.hash[i].Load() != r.hash {
			continue
		}
		chk, cur, until, ok := set.dec[i].load()
		if !ok || chk != check {
			continue // being written (a miss costs a read), or another host
		}
		if until == 0 || at >= until {
			return current{}, false
		}
		if rs := cur.rec.RestrainedUntil; !rs.IsZero() && !now.Before(rs) {
			return current{}, false
		}
		set.markUsed(i)
		return cur, true
	}
	return current{}, false
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
	if c.unchangedHint(r, e) {
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	set, i := c.find(r, host)
	if i >= 0 {
		old := &set.slot[i].e
		switch {
		case old.seq > e.seq:
			return // newer knowledge wins
		case c.stale == 0 && !old.gone && !e.gone && old.cur.ver == e.cur.ver:
			// Hints only, and the hint is unchanged: leave the slot
			// unwritten.
			set.markUsed(i)
			return
		}
		*old = e
		set.tag[i].Store(tagOf(e))
		c.publish(set, i, host, e)
		set.markUsed(i)
		return
	}
	if c.stale == 0 && absent(e) {
		// A write guesses "absent" without a hint anyway: caching it
		// would only evict a useful hint (and write a line other cores
		// read) on every closed host's Allow.
		return
	}
	if e.seq < sh.floor {
		// The host's entry may have been evicted after this knowledge was
		// superseded; caching it could go backwards.
		return
	}
	if set == nil {
		// The set's first entry: allocated here, after the checks above,
		// so that nothing is allocated for an entry not kept. The set is
		// published empty (hash 0 everywhere) before its slot is filled,
		// as a slot is filled in a set already there.
		sets := sh.sets.Load()
		if sets == nil {
			s := make([]atomic.Pointer[cacheSet], c.sets)
			sets = &s
			sh.sets.Store(sets)
		}
		set = c.newSet()
		(*sets)[r.set].Store(set)
	}
	i = -1
	for j := range c.ways {
		if set.hash[j].Load() == 0 {
			i = j
			break
		}
	}
	if i < 0 {
		// Full: CLOCK over the set, at most one lap past used slots.
		for set.used.Load()&(1<<set.hand) != 0 {
			set.used.And(^uint32(1 << set.hand))
			set.hand = uint8((int(set.hand) + 1) % c.ways)
		}
		i = int(set.hand)
		set.hand = uint8((i + 1) % c.ways)
		sh.floor = max(sh.floor, set.slot[i].e.seq)
	}
	// The decision goes first: a reader matching the new hash must not
	// find the evicted host's entry under it (the second hash would
	// refuse it anyway).
	c.publish(set, i, host, e)
	set.hash[i].Store(r.hash)
	set.tag[i].Store(tagOf(e))
	set.slot[i] = cacheSlot{host: host, e: e}
	set.used.And(^uint32(1 << i))
}

// publish makes slot i's entry readable by get; the shard's lock is held.
func (c *cache) publish(set *cacheSet, i int, host string, e cached) {
	if set.dec != nil {
		set.dec[i].store(c, maphash.String(c.check, host), e)
	}
}

// tagOf is e's slot tag.
func tagOf(e cached) uint64 {
	if e.gone {
		return 0
	}
	return hintTag(e.cur.ver)
}

// markUsed sets slot i's used bit, writing only when it is not set.
func (s *cacheSet) markUsed(i int) {
	if s.used.Load()&(1<<i) == 0 {
		s.used.Or(1 << i)
	}
}

// unchangedHint reports, without the shard's lock, whether e is a hint the
// cache already holds unchanged for the host hashed in r, in a slot the
// CLOCK hand will spare: then set has nothing to write. Only hashes are
// compared, not host names: a collision of two hosts' 64-bit hashes in one
// set only skips a hint, which costs a read later, never a wrong write (a
// hint is checked by the store's compare-and-swap).
func (c *cache) unchangedHint(r slotRef, e cached) bool {
	if c.stale != 0 || e.gone {
		return false
	}
	set := r.setOf()
	if set == nil {
		return absent(e)
	}
	for i := range c.ways {
		if set.hash[i].Load() == r.hash {
			return set.tag[i].Load() == hintTag(e.cur.ver) && set.used.Load()&(1<<i) != 0
		}
	}
	// Not cached: an absent record is not worth a slot (see set).
	return absent(e)
}

// absent reports whether e says the record is absent.
func absent(e cached) bool { return !e.gone && e.cur.ver == driver.NoVersion }

// len returns the entries held, tombstones included.
func (c *cache) len() int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		if sets := sh.sets.Load(); sets != nil {
			for j := range *sets {
				set := (*sets)[j].Load()
				if set == nil {
					continue
				}
				for k := range c.ways {
					if set.hash[k].Load() != 0 {
						n++
					}
				}
			}
		}
		sh.mu.Unlock()
	}
	return n
}
