// Package memory is an in-process driver.Store: exact TTLs on an injectable
// clock, atomic compare-and-swap under a mutex per shard of keys. It is the
// reference adapter, for tests, simulations and single-process deployments.
package memory

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// Store is a driver.Store held in memory. The zero value is not usable; call
// New.
//
// Keys are spread over shards by a hash, each under its own mutex, so
// workers asking about different hosts do not wait for each other.
type Store struct {
	// clock is nil for the default: the store then counts TTLs down on the
	// monotonic clock from base (time.Since reads one clock where
	// time.Now reads two), as a server counts a TTL down on its own clock.
	clock func() time.Time
	base  time.Time

	seed   maphash.Seed
	next   atomic.Uint64 // last version handed out; never reused
	shards [shards]shard
}

const shards = 64

type shard struct {
	mu      sync.Mutex
	entries map[string]entry
	writes  int // writes since the last sweep
	_       [64]byte
}

type entry struct {
	value   []byte
	version driver.Version
	// expires is on the store's timeline: nanoseconds since base on the
	// monotonic clock; with WithClock, expiresAt holds the instant instead,
	// since an injected clock may jump further than an int64 of
	// nanoseconds spans (a simulation starting at the zero time).
	expires   int64
	expiresAt time.Time
}

// expired reports whether e has expired at now (the store's timeline) or
// at (WithClock's instant).
func (s *Store) expired(e entry, now int64, at time.Time) bool {
	if s.clock != nil {
		return !at.Before(e.expiresAt)
	}
	return now >= e.expires
}

// Option configures a Store.
type Option func(*Store)

// WithClock makes the store judge expiry by clock instead of time.Now; give
// the Breakers over it the same clock in simulations.
func WithClock(clock func() time.Time) Option { return func(s *Store) { s.clock = clock } }

// New returns an empty Store.
func New(opts ...Option) *Store {
	s := &Store{seed: maphash.MakeSeed()}
	for _, o := range opts {
		o(s)
	}
	if s.clock == nil {
		s.base = time.Now()
	}
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

// clock is one reading of the store's clock, taken when first needed.
type clock struct {
	read bool
	now  int64
	at   time.Time
}

func (c *clock) get(s *Store) {
	if !c.read {
		c.now, c.at = s.now()
		c.read = true
	}
}

// lookup returns key's live entry, deleting it if it has expired. It reads
// the clock only when there is an entry to judge, so a Get of an absent
// key, the common case, costs no clock read.
func (sh *shard) lookup(s *Store, key string, c *clock) (entry, bool) {
	e, ok := sh.entries[key]
	if !ok {
		return entry{}, false
	}
	c.get(s)
	if s.expired(e, c.now, c.at) {
		delete(sh.entries, key)
		return entry{}, false
	}
	return e, true
}

// Get implements driver.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("memory: get %q: %w", key, err)
	}
	sh := s.shard(key)
	var c clock
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, ok := sh.lookup(s, key, &c)
	if !ok {
		return nil, driver.NoVersion, driver.ErrNotFound
	}
	return clone(e.value), e.version, nil
}

// CompareAndSwap implements driver.Store.
func (s *Store) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("memory: put %q: %w", key, err)
	}
	if ttl <= 0 {
		return 0, fmt.Errorf("memory: put %q: ttl %v is not positive", key, ttl)
	}
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var c clock
	c.get(s)
	e, _ := sh.lookup(s, key, &c)
	if e.version != old {
		return 0, &driver.ConflictError{Value: clone(e.value), Version: e.version}
	}
	expires := c.now + int64(ttl)
	if expires < c.now {
		expires = math.MaxInt64 // a TTL past the timeline's end never expires
	}
	// Taken under the shard's lock: a key's versions only grow.
	v := driver.Version(s.next.Add(1))
	if sh.entries == nil {
		sh.entries = make(map[string]entry)
	}
	sh.entries[key] = entry{value: clone(value), version: v, expires: expires, expiresAt: c.at.Add(ttl)}
	sh.sweep(s, &c)
	return v, nil
}

// CompareAndDelete implements driver.Store.
func (s *Store) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: delete %q: %w", key, err)
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
	delete(sh.entries, key)
	return nil
}

// sweep reclaims a shard's expired entries once the writes to it since its
// last sweep outnumber half its entries: amortised O(1) per write, and dead
// hosts never pile up beyond about twice the live ones.
func (sh *shard) sweep(s *Store, c *clock) {
	sh.writes++
	if sh.writes < 16 || sh.writes < len(sh.entries)/2 {
		return
	}
	sh.writes = 0
	for k, e := range sh.entries {
		if s.expired(e, c.now, c.at) {
			delete(sh.entries, k)
		}
	}
}

// Len returns the number of entries held, expired or not: what the store
// physically occupies.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.entries)
		sh.mu.Unlock()
	}
	return n
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}
