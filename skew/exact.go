package skew

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// Exact is an in-process driver.Store with exact relative expiry on a given
// clock and atomic compares: the undistorted store a simulation wraps with
// New. (It mirrors backends/memory, which skew may not import.)
type Exact struct {
	clock func() time.Time

	mu      sync.Mutex
	next    driver.Version
	entries map[string]exactEntry
}

type exactEntry struct {
	value   []byte
	ver     driver.Version
	expires time.Time
}

// NewExact returns an empty Exact store judging expiry by clock (nil:
// time.Now).
func NewExact(clock func() time.Time) *Exact {
	if clock == nil {
		clock = time.Now
	}
	return &Exact{clock: clock, entries: make(map[string]exactEntry)}
}

// Traits: atomic, exact relative expiry.
func (s *Exact) Traits() driver.Traits {
	return driver.Traits{Atomic: true, Expiry: driver.ExpiryModel{Kind: driver.ExpiryRelative}}
}

func (s *Exact) live(key string) (exactEntry, bool) {
	e, ok := s.entries[key]
	if ok && !s.clock().Before(e.expires) {
		delete(s.entries, key)
		return exactEntry{}, false
	}
	return e, ok
}

// Get implements driver.Store.
func (s *Exact) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("exact: get %q: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.live(key)
	if !ok {
		return nil, driver.NoVersion, driver.ErrNotFound
	}
	return append([]byte(nil), e.value...), e.ver, nil
}

// CompareAndSwap implements driver.Store.
func (s *Exact) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("exact: put %q: %w", key, err)
	}
	if ttl <= 0 {
		return 0, fmt.Errorf("exact: put %q: ttl %v is not positive", key, ttl)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, _ := s.live(key)
	if e.ver != old {
		return 0, &driver.ConflictError{Value: append([]byte(nil), e.value...), Version: e.ver}
	}
	s.next++
	s.entries[key] = exactEntry{value: append([]byte(nil), value...), ver: s.next, expires: s.clock().Add(ttl)}
	return s.next, nil
}

// CompareAndDelete implements driver.Store.
func (s *Exact) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("exact: delete %q: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.live(key)
	switch {
	case !ok:
		return driver.ErrNotFound
	case e.ver != old:
		return &driver.ConflictError{Value: append([]byte(nil), e.value...), Version: e.ver}
	}
	delete(s.entries, key)
	return nil
}
