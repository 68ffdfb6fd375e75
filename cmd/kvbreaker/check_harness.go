package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
)

// checkHarness is the conformance harness over a live deployment: each
// MakeStore is a store under a new sub-prefix of prefix, and every key
// written through it is remembered for cleanup.
type checkHarness struct {
	c      *conn
	prefix string
	n      atomic.Int64 // stores made
	calls  atomic.Int64 // store calls made

	mu     sync.Mutex
	stores []*trackedStore
}

// advancingHarness is a checkHarness over a backend whose clock the
// command controls (test servers): a conformance.TimeAdvancer.
type advancingHarness struct{ *checkHarness }

func (h advancingHarness) Advance(ctx context.Context, d time.Duration) error {
	return h.c.advance(ctx, d)
}

// harness returns h, as a conformance.TimeAdvancer when the backend's clock
// can be advanced.
func (h *checkHarness) harness() conformance.Harness {
	if h.c.advance != nil {
		return advancingHarness{h}
	}
	return h
}

// Describe names the deployment in the suite's unreachable-store message.
func (h *checkHarness) Describe() string { return h.c.describe }

func (h *checkHarness) MakeStore(context.Context) (driver.Store, error) {
	n := h.n.Add(1)
	prefix := fmt.Sprintf("%s%d/", h.prefix, n)
	s, err := kvbreaker.Prefixed(h.c.store, prefix)
	if err != nil {
		return nil, err
	}
	t := &trackedStore{Store: s, prefix: prefix, calls: &h.calls, keys: make(map[string]bool)}
	h.mu.Lock()
	h.stores = append(h.stores, t)
	h.mu.Unlock()
	if cs, ok := s.(driver.ClockSampler); ok {
		// Only a store with a clock shows one: the clock-sampler case
		// runs for it, and is not promised by the others.
		return &trackedClock{t, cs}, nil
	}
	return t, nil
}

// trackedClock is a trackedStore whose store can read its server's clock.
type trackedClock struct {
	*trackedStore
	clock driver.ClockSampler
}

func (s *trackedClock) SampleClock(ctx context.Context) (time.Time, time.Duration, error) {
	s.calls.Add(1)
	return s.clock.SampleClock(ctx)
}

// Close: the connection belongs to runCheck, which cleans up and closes it.
func (h *checkHarness) Close() {}

// progressEvery is how often a running check reports progress.
var progressEvery = 5 * time.Second

// showProgress prints a line to w every few seconds while the check runs.
// The returned function stops it.
func (h *checkHarness) showProgress(w io.Writer, start time.Time) func() {
	if w == io.Discard {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(w, "kvbreaker check: %s elapsed, %d stores made, %d store calls so far\n",
					time.Since(start).Round(time.Second), h.n.Load(), h.calls.Load())
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// cleanupTimeout bounds the deletion of what the check wrote, even after
// --timeout.
const cleanupTimeout = time.Minute

// A keyPurger is a store that keeps what a delete or an expiry leaves (a
// tombstone, an expired row until a sweep) and removes it by key as it
// stores it: PurgeKey, of the backends whose stores keep such entries.
type keyPurger interface {
	PurgeKey(ctx context.Context, fullKey string) (int64, error)
}

// cleanup deletes every key the check's stores wrote, within bound, and
// returns how many it deleted (keys that still held a record), how many
// remains it purged (tombstones and expired entries a backend keeps: see
// keyPurger) and how many keys it could not remove (absent keys count as
// none of these).
func (h *checkHarness) cleanup(bound time.Duration) (deleted, purged, left int) {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	h.mu.Lock()
	stores := slices.Clone(h.stores)
	h.mu.Unlock()
	for _, s := range stores {
		for _, key := range s.written() {
			err := deleteKey(ctx, s.Store, key)
			if err != nil && !errors.Is(err, driver.ErrNotFound) {
				left++
				continue
			}
			if err == nil {
				deleted++
			}
			p, ok := h.c.store.(keyPurger)
			if !ok {
				continue
			}
			// A backend that keeps expired entries or tombstones (a
			// delete leaves one where a retried delete must recognise
			// itself) removes them too.
			n, err := p.PurgeKey(ctx, kvbreaker.PrefixedKey(s.prefix, key))
			if err != nil {
				left++
			}
			purged += int(n)
		}
	}
	// Workers KV queues deletes: send them before counting them done.
	if f, ok := h.c.store.(driver.Flusher); ok && f.Flush(ctx) != nil {
		left = max(left, 1)
	}
	return deleted, purged, left
}

// deleteKey deletes key whatever its version, retrying a few conflicts.
func deleteKey(ctx context.Context, s driver.Store, key string) error {
	var err error
	for range 5 {
		var ver driver.Version
		if _, ver, err = s.Get(ctx, key); err != nil {
			return err
		}
		if err = s.CompareAndDelete(ctx, key, ver); !errors.Is(err, driver.ErrConflict) {
			return err
		}
	}
	return err
}

// trackedStore remembers the keys written through it and counts calls.
type trackedStore struct {
	driver.Store
	prefix string
	calls  *atomic.Int64

	mu   sync.Mutex
	keys map[string]bool
}

func (s *trackedStore) written() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.keys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (s *trackedStore) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	s.calls.Add(1)
	return s.Store.Get(ctx, key)
}

func (s *trackedStore) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	s.calls.Add(1)
	if driver.ValidateKey(key) == nil {
		s.mu.Lock()
		s.keys[key] = true
		s.mu.Unlock()
	}
	return s.Store.CompareAndSwap(ctx, key, old, value, ttl)
}

func (s *trackedStore) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	s.calls.Add(1)
	return s.Store.CompareAndDelete(ctx, key, old)
}
