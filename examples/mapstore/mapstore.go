// Package mapstore is a teaching example: the smallest store adapter, a
// map under a mutex whose entries expire on an injected clock. It
// implements driver.Store and nothing else, and its test runs the whole
// conformance suite over it (go test ./examples/mapstore/). Copy its shape,
// not its storage: an adapter over a real server runs each step below as a
// request (a read, a conditional write, a conditional delete).
package mapstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// Store is a map of entries, each with a version and an expiry instant.
type Store struct {
	now func() time.Time

	mu      sync.Mutex
	entries map[string]entry
	// last is the last version handed out: versions are never reused for
	// a key, deletes included, so a counter for the whole store will do.
	last driver.Version
}

type entry struct {
	value   []byte
	version driver.Version
	expires time.Time
}

// New makes an empty store whose entries expire by now (time.Now if nil).
func New(now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{now: now, entries: map[string]entry{}}
}

// Traits: compare-and-swap is atomic (one mutex), and the store judges
// expiry by its own clock (ExpiryRelative), as a server counting a TTL
// down would. InProcess: no call does I/O.
func (s *Store) Traits() driver.Traits {
	return driver.Traits{Atomic: true, Expiry: driver.ExpiryModel{Kind: driver.ExpiryRelative}, InProcess: true}
}

// live is key's entry unless it is absent or expired (s.mu held).
func (s *Store) live(key string) (entry, bool) {
	e, ok := s.entries[key]
	if !ok || !s.now().Before(e.expires) {
		return entry{}, false
	}
	return e, true
}

func (s *Store) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, driver.NoVersion, opError("get", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.live(key)
	if !ok {
		return nil, driver.NoVersion, driver.ErrNotFound
	}
	return clone(e.value), e.version, nil
}

func (s *Store) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	if err := ctx.Err(); err != nil {
		return driver.NoVersion, opError("compare-and-swap", key, err)
	}
	if ttl <= 0 {
		return driver.NoVersion, opError("compare-and-swap", key, fmt.Errorf("ttl %v is not positive", ttl))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, _ := s.live(key) // an expired entry is absent: NoVersion replaces it
	if e.version != old {
		return driver.NoVersion, &driver.ConflictError{Value: clone(e.value), Version: e.version}
	}
	s.last++
	s.entries[key] = entry{value: clone(value), version: s.last, expires: s.now().Add(ttl)}
	return s.last, nil
}

func (s *Store) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	if err := ctx.Err(); err != nil {
		return opError("compare-and-delete", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.live(key)
	switch {
	case !ok:
		return driver.ErrNotFound
	case e.version != old:
		return &driver.ConflictError{Value: clone(e.value), Version: e.version}
	}
	delete(s.entries, key)
	return nil
}

// opError is the shape every error but ErrNotFound and a conflict takes.
func opError(op, key string, err error) error {
	return &driver.OpError{Backend: "mapstore", Op: op, Key: key, Err: err}
}

// clone keeps the caller's slice and the stored one apart.
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}
