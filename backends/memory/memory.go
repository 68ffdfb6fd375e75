// Package memory is an in-process driver.Store: exact TTLs on an injectable
// clock, atomic compare-and-swap under a mutex per shard of keys. It is the
// reference adapter, for tests, simulations and single-process deployments.
//
// Keys are stored as given; to share one Store between fleets, wrap it with
// kvbreaker.Prefixed. A Store lists its live keys (driver.Lister) in
// byte order, tells how long it keeps a key (driver.ExpiryReader) and
// pushes its changes to followers (driver.Follower, see Store.Follow). It
// holds no connections and queues no writes; Close stops its background
// sweep of expired entries and ends every Follow (see Store).
//
// Errors other than driver.ErrNotFound and conflicts (*driver.ConflictError)
// are *driver.OpError: "memory: get host.example: context canceled".
package memory

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// Store is a driver.Store held in memory. The zero value is not usable; call
// New.
//
// Keys are spread over shards by a hash. Reads take no lock and write no
// shared memory (each shard's entries are a sync.Map of immutable entries),
// so Gets from many cores share the cache lines they read instead of
// passing a lock's line between them; writers to a shard take its mutex,
// which orders compare-and-swaps.
//
// Expired entries are freed by time, not by traffic: each shard keeps its
// entries in a heap ordered by expiry, every write frees its shard's expired
// entries, and on the default clock a background sweep (a timer, no
// goroutine while it waits) frees every shard's expired entries about a
// second after they expire. See Close.
type Store struct {
	// clock is nil for the default: the store then counts TTLs down on the
	// monotonic clock from base (time.Since reads one clock where
	// time.Now reads two), as a server counts a TTL down on its own clock.
	clock func() time.Time
	base  time.Time

	seed   maphash.Seed
	next   atomic.Uint64 // last version handed out; never reused
	turn   atomic.Uint32 // the shard a write on WithClock frees next
	sweep  sweeper
	follow follows
	shards [shards]shard
}

const shards = 64

type shard struct {
	mu sync.Mutex // held by writers; readers only Load
	// entries maps a key to its *entry, which is never modified once
	// stored (a write stores a new one) but for its place in heap.
	entries sync.Map
	// heap holds the same entries, ordered by expiry (under mu): its length
	// is the number of entries held, expired or not.
	heap []*entry
	_    [64]byte
}

type entry struct {
	key     string
	value   []byte
	version driver.Version
	// expires and expiresNsec are when the entry expires on the store's
	// timeline (see clock).
	expires     int64
	expiresNsec int32
	// pos is the entry's index in its shard's heap. Only writers read or
	// change it, under the shard's lock.
	pos int32
}

// expired reports whether e has expired at c.
func expired(e *entry, c *clock) bool {
	return c.now > e.expires || c.now == e.expires && c.nsec >= e.expiresNsec
}

// options collects the Options of New.
type options struct {
	clock       func() time.Time
	followQueue int
}

// Option configures a Store.
type Option func(*options)

// WithClock makes the store judge expiry by clock instead of time.Now; give
// the Breakers over it the same clock in simulations. A nil clock means
// time.Now.
//
// The store cannot know when an injected clock moves, so it runs no
// background sweep: each write frees the expired entries of its own shard
// and of one other shard in turn, so after 64 writes (the shard count)
// every entry expired before them is freed.
func WithClock(clock func() time.Time) Option { return func(o *options) { o.clock = clock } }

// String names the deployment as every backend's Store does: a memory
// store lives in this process, and no other sees it.
func (s *Store) String() string { return "memory (this process)" }

// New returns an empty Store. Unlike the other adapters' constructors it
// returns no error: no option value is invalid.
func New(opts ...Option) *Store {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	s := &Store{seed: maphash.MakeSeed(), clock: o.clock}
	s.follow.queue = o.followQueue
	if s.follow.queue <= 0 {
		s.follow.queue = DefaultFollowQueue
	}
	if s.clock == nil {
		s.base = time.Now()
	}
	s.sweep.init()
	return s
}

// now reads the store's clock: nanoseconds since base, or with WithClock
// the clock's instant.
func (s *Store) now() (int64, time.Time) {
	if s.clock == nil {
		return int64(time.Since(s.base)), time.Time{}
	}
	return 0, s.clock()
}

func (s *Store) shard(key string) *shard {
	return &s.shards[maphash.String(s.seed, key)%shards]
}

// Traits: atomic, exact relative expiry, linearizable reads, in process (so
// the Breaker spares it a per-call timeout).
func (s *Store) Traits() driver.Traits {
	return driver.Traits{Atomic: true, Expiry: driver.ExpiryModel{Kind: driver.ExpiryRelative}, InProcess: true}
}

// clock is one reading of the store's clock, taken when first needed, on
// the store's timeline: on the default clock nanoseconds since base on the
// monotonic clock (nsec 0); with WithClock the Unix seconds and nanoseconds
// of the clock's instant at, since an injected clock may jump further than
// an int64 of nanoseconds spans (a simulation starting at the zero time).
type clock struct {
	read bool
	now  int64
	nsec int32
	at   time.Time
}

func (c *clock) get(s *Store) {
	if !c.read {
		c.now, c.at = s.now()
		if s.clock != nil {
			c.now, c.nsec = c.at.Unix(), int32(c.at.Nanosecond())
		}
		c.read = true
	}
}

// live returns key's entry unless it is absent or has expired. It reads the
// clock only when there is an entry to judge, so a Get of an absent key,
// the common case, costs no clock read.
func (sh *shard) live(s *Store, key string, c *clock) (*entry, bool) {
	v, ok := sh.entries.Load(key)
	if !ok {
		return nil, false
	}
	e := v.(*entry)
	c.get(s)
	if expired(e, c) {
		return e, false
	}
	return e, true
}

// lookup is live for writers (sh.mu held): it also deletes an expired
// entry, and returns the zero entry for an absent one.
func (sh *shard) lookup(s *Store, key string, c *clock) (*entry, bool) {
	e, ok := sh.live(s, key, c)
	if !ok {
		if e != nil {
			sh.remove(s, e)
		}
		return &entry{}, false
	}
	return e, true
}

// Get implements driver.Store. It takes no lock: an expired entry reads as
// absent until a write or the sweep frees it.
func (s *Store) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, opError(adapter.OpGet, key, err)
	}
	var c clock
	e, ok := s.shard(key).live(s, key, &c)
	if !ok {
		return nil, driver.NoVersion, driver.ErrNotFound
	}
	return clone(e.value), e.version, nil
}

// Expiry implements driver.ExpiryReader: the time until key's TTL ends,
// driver.NoExpiry for a TTL past the end of the store's timeline (about
// 292 years), ErrNotFound for an absent or expired key.
func (s *Store) Expiry(ctx context.Context, key string) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, opError(adapter.OpExpiry, key, err)
	}
	var c clock
	e, ok := s.shard(key).live(s, key, &c)
	switch {
	case !ok:
		return 0, driver.ErrNotFound
	case s.clock != nil:
		return time.Unix(e.expires, int64(e.expiresNsec)).Sub(c.at), nil // saturates at driver.NoExpiry
	case e.expires == math.MaxInt64:
		return driver.NoExpiry, nil
	}
	return time.Duration(e.expires - c.now), nil
}

// CompareAndSwap implements driver.Store.
func (s *Store) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	if err := ctx.Err(); err != nil {
		return 0, opError(adapter.OpSwap, key, err)
	}
	if ttl <= 0 {
		return 0, opError(adapter.OpSwap, key, fmt.Errorf("ttl %v is not positive", ttl))
	}
	sh := s.shard(key)
	sh.mu.Lock()
	var c clock
	c.get(s)
	e, _ := sh.lookup(s, key, &c)
	if e.version != old {
		sh.mu.Unlock()
		return 0, &driver.ConflictError{Value: clone(e.value), Version: e.version}
	}
	// Taken under the shard's lock: a key's versions only grow.
	v := driver.Version(s.next.Add(1))
	ne := &entry{key: key, value: clone(value), version: v}
	if s.clock != nil {
		at := c.at.Add(ttl)
		ne.expires, ne.expiresNsec = at.Unix(), int32(at.Nanosecond())
	} else if ne.expires = c.now + int64(ttl); ne.expires < c.now {
		ne.expires = math.MaxInt64 // a TTL past the timeline's end never expires
	}
	// Followers hear of the write before a Get can see it, so a Synced
	// taken after this write is never ahead of it.
	s.publish(driver.Change{Kind: driver.ChangePut, Key: key, Value: ne.value, Version: v})
	if old == driver.NoVersion {
		sh.push(ne)
	} else {
		sh.replace(e, ne)
	}
	sh.entries.Store(key, ne)
	sh.reclaim(s, &c, -1)
	sh.mu.Unlock()
	s.afterWrite(sh, ne.expires)
	return v, nil
}

// CompareAndDelete implements driver.Store.
func (s *Store) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	if err := ctx.Err(); err != nil {
		return opError(adapter.OpDelete, key, err)
	}
	sh := s.shard(key)
	var c clock
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, ok := sh.lookup(s, key, &c)
	switch {
	case !ok:
		return driver.ErrNotFound
	case e.version != old:
		return &driver.ConflictError{Value: clone(e.value), Version: e.version}
	}
	sh.remove(s, e)
	return nil
}

// Len returns the number of entries held, expired or not: what the store
// physically occupies.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.heap)
		sh.mu.Unlock()
	}
	return n
}

// List implements driver.Lister: up to limit live keys that begin with
// prefix and sort after cursor, in byte order, and the cursor of the next
// page ("" after the last). Expired entries are not listed (nor removed).
//
// There is no index in key order (it would cost every write), so each page
// walks every entry once, holding one shard's lock at a time, and keeps at
// most 2×(limit+1) keys: O(n log limit) time, O(limit) memory per page
// (a page of 100 from 100,000 keys: 10.5 ms, 9 KB, 9 allocations on a
// 2-core VM; go test -run '^$' -bench BenchmarkList -benchmem
// ./backends/memory/).
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", opError(adapter.OpList, prefix, err)
	}
	if err := adapter.ListArgs(limit); err != nil {
		return nil, "", opError(adapter.OpList, prefix, err)
	}
	// One more than limit tells whether another page follows.
	want := limit + 1
	var keys []string
	var c clock
	for i := range s.shards {
		if i%8 == 0 && ctx.Err() != nil {
			return nil, "", opError(adapter.OpList, prefix, ctx.Err())
		}
		sh := &s.shards[i]
		sh.mu.Lock()
		for kv, v := range sh.entries.Range {
			k := kv.(string)
			if !strings.HasPrefix(k, prefix) || k <= cursor {
				continue
			}
			c.get(s)
			if expired(v.(*entry), &c) {
				continue
			}
			keys = append(keys, k)
			if len(keys) >= 2*want {
				slices.Sort(keys)
				keys = keys[:want]
			}
		}
		sh.mu.Unlock()
	}
	slices.Sort(keys)
	if len(keys) <= limit {
		return keys, "", nil
	}
	keys = keys[:limit:limit]
	return keys, keys[limit-1], nil
}

// opError is the shape of every error but ErrNotFound and conflicts.
func opError(op, key string, err error) error {
	return &driver.OpError{Backend: "memory", Op: op, Key: key, Err: err}
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}
