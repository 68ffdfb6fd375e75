// Package memory is an in-process core.Store: exact TTLs on an injectable
// clock, atomic compare-and-swap under a mutex. It is the reference adapter,
// for tests, simulations and single-process deployments.
package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kvbreaker/kvbreaker/core"
)

// Store is a core.Store held in memory. The zero value is not usable; call
// New.
type Store struct {
	clock func() time.Time

	mu      sync.Mutex
	entries map[string]entry
	next    core.Version // last version handed out; never reused
	writes  int          // writes since the last sweep
}

type entry struct {
	value   []byte
	version core.Version
	expires time.Time
}

// Option configures a Store.
type Option func(*Store)

// WithClock makes the store judge expiry by clock instead of time.Now; give
// the Breakers over it the same clock in simulations.
func WithClock(clock func() time.Time) Option { return func(s *Store) { s.clock = clock } }

// New returns an empty Store.
func New(opts ...Option) *Store {
	s := &Store{clock: time.Now, entries: make(map[string]entry)}
	for _, o := range opts {
		o(s)
	}
	return s
}

// InProcess marks the store as answering without I/O (core.InProcess), so
// Breaker spares it a per-call timeout.
func (s *Store) InProcess() {}

// Traits: atomic, exact relative expiry, linearizable reads.
func (s *Store) Traits() core.Traits {
	return core.Traits{Atomic: true, Expiry: core.ExpiryModel{Kind: core.ExpiryRelative}}
}

// lookup returns key's live entry, deleting it if it has expired.
func (s *Store) lookup(key string, now time.Time) (entry, bool) {
	e, ok := s.entries[key]
	if ok && !now.Before(e.expires) {
		delete(s.entries, key)
		return entry{}, false
	}
	return e, ok
}

// Get implements core.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, core.Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("memory: get %q: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.lookup(key, s.clock())
	if !ok {
		return nil, core.NoVersion, core.ErrNotFound
	}
	return clone(e.value), e.version, nil
}

// CompareAndSwap implements core.Store.
func (s *Store) CompareAndSwap(ctx context.Context, key string, old core.Version, value []byte, ttl time.Duration) (core.Version, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("memory: put %q: %w", key, err)
	}
	if ttl <= 0 {
		return 0, fmt.Errorf("memory: put %q: ttl %v is not positive", key, ttl)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	e, _ := s.lookup(key, now)
	if e.version != old {
		return 0, &core.ConflictError{Value: clone(e.value), Version: e.version}
	}
	s.next++
	s.entries[key] = entry{value: clone(value), version: s.next, expires: now.Add(ttl)}
	s.sweep(now)
	return s.next, nil
}

// CompareAndDelete implements core.Store.
func (s *Store) CompareAndDelete(ctx context.Context, key string, old core.Version) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: delete %q: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.lookup(key, s.clock())
	switch {
	case !ok:
		return core.ErrNotFound
	case e.version != old:
		return &core.ConflictError{Value: clone(e.value), Version: e.version}
	}
	delete(s.entries, key)
	return nil
}

// sweep reclaims expired entries once the writes since the last sweep
// outnumber half the live entries: amortised O(1) per write, and dead hosts
// never pile up beyond twice the live ones.
func (s *Store) sweep(now time.Time) {
	s.writes++
	if s.writes < 64 || s.writes < len(s.entries)/2 {
		return
	}
	s.writes = 0
	for k, e := range s.entries {
		if !now.Before(e.expires) {
			delete(s.entries, k)
		}
	}
}

// Len returns the number of entries held, expired or not: what the store
// physically occupies.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}
