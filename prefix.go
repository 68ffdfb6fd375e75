package kvbreaker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// MaxPrefixLen is the longest key prefix Prefixed accepts.
const MaxPrefixLen = 128

// Prefixed returns a store that keeps every key under prefix in store, so
// that several fleets (or environments) can share one store without seeing
// each other's hosts. It works over any driver.Store, and passes the
// optional interfaces through: listing (driver.Lister) lists only keys under
// prefix, with prefix removed; Flush and Close reach store; and when store
// can read its server's clock (driver.ClockSampler), so can the prefixed
// store, since a prefix does not change whose clock it is. An empty prefix
// returns store itself.
//
// The prefix must be printable (it passes driver.ValidateKey) and at most
// MaxPrefixLen bytes.
func Prefixed(store driver.Store, prefix string) (driver.Store, error) {
	if store == nil {
		return nil, errors.New("kvbreaker: Prefixed needs a store")
	}
	if prefix == "" {
		return store, nil
	}
	if len(prefix) > MaxPrefixLen {
		return nil, fmt.Errorf("kvbreaker: prefix of %d bytes: use at most %d", len(prefix), MaxPrefixLen)
	}
	if err := driver.ValidateKey(prefix); err != nil {
		return nil, fmt.Errorf("kvbreaker: prefix %q: %w", prefix, err)
	}
	p := &prefixed{store: store, prefix: prefix}
	if cs, ok := store.(driver.ClockSampler); ok {
		// Only then: a Breaker checks clocks of the stores that have one.
		return &prefixedClock{p, cs}, nil
	}
	return p, nil
}

// prefixedClock is a prefixed store whose store can read its clock.
type prefixedClock struct {
	*prefixed
	clock driver.ClockSampler
}

func (p *prefixedClock) SampleClock(ctx context.Context) (time.Time, time.Duration, error) {
	return p.clock.SampleClock(ctx)
}

type prefixed struct {
	store  driver.Store
	prefix string
}

func (p *prefixed) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	return p.store.Get(ctx, p.prefix+key)
}

func (p *prefixed) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	return p.store.CompareAndSwap(ctx, p.prefix+key, old, value, ttl)
}

func (p *prefixed) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	return p.store.CompareAndDelete(ctx, p.prefix+key, old)
}

func (p *prefixed) Traits() driver.Traits { return p.store.Traits() }

// List lists the keys under the prefix; it fails with errors.ErrUnsupported
// when the store cannot enumerate.
func (p *prefixed) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	l, ok := p.store.(driver.Lister)
	if !ok {
		return nil, "", fmt.Errorf("kvbreaker: list: %T cannot enumerate keys: %w", p.store, errors.ErrUnsupported)
	}
	// The cursor is the store's, opaque: passed on as it came (a Redis
	// cursor is no key, and prefixing it broke the second page).
	keys, next, err := l.List(ctx, p.prefix+prefix, cursor, limit)
	for i, k := range keys {
		keys[i] = strings.TrimPrefix(k, p.prefix)
	}
	return keys, next, err
}

// Expiry reads how long the store keeps key; it fails with
// errors.ErrUnsupported when the store cannot say (no driver.ExpiryReader).
func (p *prefixed) Expiry(ctx context.Context, key string) (time.Duration, error) {
	r, ok := p.store.(driver.ExpiryReader)
	if !ok {
		return 0, fmt.Errorf("kvbreaker: expiry: %T cannot read a key's expiry: %w", p.store, errors.ErrUnsupported)
	}
	return r.Expiry(ctx, p.prefix+key)
}

// Flush flushes the store if it queues writes.
func (p *prefixed) Flush(ctx context.Context) error {
	if f, ok := p.store.(driver.Flusher); ok {
		return f.Flush(ctx)
	}
	return nil
}

// Close closes the store if it can be closed.
func (p *prefixed) Close() error {
	if c, ok := p.store.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
