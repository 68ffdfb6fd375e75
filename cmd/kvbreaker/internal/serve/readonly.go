package serve

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// ErrReadOnly is what a ReadOnlyStore answers a write with.
var ErrReadOnly = errors.New("kvbreaker dashboard only reads the store: a write was refused (send it through kvbreaker serve or kvbreaker reset)")

// ReadOnlyStore is a store that reads through to another and refuses
// every write, for kvbreaker dashboard: whatever the Breaker above it is
// asked, the store cannot change. It lists and samples the clock when the
// store below can.
type ReadOnlyStore struct {
	store   driver.Store
	refused atomic.Uint64
}

// readOnlyClock is a ReadOnlyStore over a store that can read its clock:
// only then does a Breaker above it check clocks.
type readOnlyClock struct {
	*ReadOnlyStore
	driver.ClockSampler
}

// ReadOnly returns store with every write refused. The result is a
// driver.ClockSampler when store is one, so that the clock offset is
// still measured.
func ReadOnly(store driver.Store) driver.Store {
	r := &ReadOnlyStore{store: store}
	if cs, ok := store.(driver.ClockSampler); ok {
		return readOnlyClock{r, cs}
	}
	return r
}

// Refused counts the writes refused by the store ReadOnly returned (zero
// for any other store).
func Refused(s driver.Store) uint64 {
	switch r := s.(type) {
	case *ReadOnlyStore:
		return r.refused.Load()
	case readOnlyClock:
		return r.refused.Load()
	}
	return 0
}

// Get reads through.
func (r *ReadOnlyStore) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	return r.store.Get(ctx, key)
}

// CompareAndSwap refuses.
func (r *ReadOnlyStore) CompareAndSwap(context.Context, string, driver.Version, []byte, time.Duration) (driver.Version, error) {
	r.refused.Add(1)
	return driver.NoVersion, ErrReadOnly
}

// CompareAndDelete refuses.
func (r *ReadOnlyStore) CompareAndDelete(context.Context, string, driver.Version) error {
	r.refused.Add(1)
	return ErrReadOnly
}

// Traits are the store's.
func (r *ReadOnlyStore) Traits() driver.Traits { return r.store.Traits() }

// List lists through, when the store can list.
func (r *ReadOnlyStore) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	l, ok := r.store.(driver.Lister)
	if !ok {
		return nil, "", fmt.Errorf("kvbreaker dashboard: %T cannot enumerate keys: %w", r.store, errors.ErrUnsupported)
	}
	return l.List(ctx, prefix, cursor, limit)
}

// Expiry reads through, when the store can say.
func (r *ReadOnlyStore) Expiry(ctx context.Context, key string) (time.Duration, error) {
	e, ok := r.store.(driver.ExpiryReader)
	if !ok {
		return 0, fmt.Errorf("kvbreaker dashboard: %T cannot read a key's expiry: %w", r.store, errors.ErrUnsupported)
	}
	return e.Expiry(ctx, key)
}
