package kvbreaker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// maxPrefixLen is the longest key prefix Prefixed accepts.
const maxPrefixLen = 128

// Prefixed returns a store that keeps every key under prefix in store, so
// that several fleets (or environments) can share one store without seeing
// each other's hosts. It works over any driver.Store, and passes the
// optional interfaces through: listing (driver.Lister) lists only keys under
// prefix, with prefix removed; Flush and Close reach store; Expiry
// (driver.ExpiryReader) reads store's; Follow (driver.Follower) follows
// only keys under prefix, delivered with prefix removed, and fails with
// errors.ErrUnsupported when store cannot follow; and when store can read its server's
// clock (driver.ClockSampler), so can the prefixed store, since a prefix does
// not change whose clock it is. An empty prefix returns store itself.
//
// The prefix must end in '/', be printable (it passes
// driver.ValidateKey) and be at most 128 bytes. Under it, a key's
// '/' and '%' are escaped as "%2F" and "%25", so no key under one prefix
// holds a '/' of its own, and no fleet's prefix can nest in another's:
// "prod/" sees nothing of "prod/eu/" (or of "prod2/"), and lists none of it.
// HostKey never emits '/' or '%', so hosts' keys are stored as they are.
// Unprefixed gives back store and prefix.
func Prefixed(store driver.Store, prefix string) (driver.Store, error) {
	if store == nil {
		return nil, errors.New("kvbreaker: Prefixed needs a store")
	}
	if prefix == "" {
		return store, nil
	}
	if len(prefix) > maxPrefixLen {
		return nil, fmt.Errorf("kvbreaker: prefix of %d bytes: use at most %d", len(prefix), maxPrefixLen)
	}
	if err := driver.ValidateKey(prefix); err != nil {
		return nil, fmt.Errorf("kvbreaker: prefix %q: %w", prefix, err)
	}
	if !strings.HasSuffix(prefix, prefixSeparator) {
		return nil, fmt.Errorf("kvbreaker: prefix %q does not end in %q, so another fleet's prefix (%q) could extend it and share its keys: use %q",
			prefix, prefixSeparator, prefix+"2", prefix+prefixSeparator)
	}
	p := &prefixed{store: store, prefix: prefix}
	if cs, ok := store.(driver.ClockSampler); ok {
		// Only then: a Breaker checks clocks of the stores that have one.
		return &prefixedClock{p, cs}, nil
	}
	return p, nil
}

// PrefixedKey is the name under which Prefixed(store, prefix) stores key:
// prefix, then key with '%' and '/' escaped. For tools that reach the
// backend directly (purging a key, looking at it with the backend's own
// client).
func PrefixedKey(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + escapeKey(key)
}

// Unprefixed returns the store and the prefix of a store Prefixed made,
// and ok true; for any other store it returns s, "" and false. For tests
// and tools that reach the backend's own key, PrefixedKey(prefix, key),
// through the inner store or its client: a conformance harness's
// LifetimeReporter or ForeignPlanter gets back the store its MakeStore
// returned, and reads or plants the key under that store's prefix.
func Unprefixed(s driver.Store) (inner driver.Store, prefix string, ok bool) {
	switch p := s.(type) {
	case *prefixed:
		return p.store, p.prefix, true
	case *prefixedClock:
		return p.store, p.prefix, true
	}
	return s, "", false
}

// prefixSeparator ends every prefix Prefixed accepts; keys under a prefix
// never hold it unescaped.
const prefixSeparator = "/"

// escapeKey escapes '%' and '/' in key, so a key under a prefix never holds
// the separator; most keys have neither and are returned as they are.
func escapeKey(key string) string {
	if !strings.ContainsAny(key, "%/") {
		return key
	}
	var b strings.Builder
	b.Grow(len(key) + 8)
	for i := 0; i < len(key); i++ {
		switch c := key[i]; c {
		case '%':
			b.WriteString("%25")
		case '/':
			b.WriteString("%2F")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// unescapeKey reverses escapeKey; ok is false for a name escapeKey cannot
// have made (a '/', or a '%' not starting "%25" or "%2F"): a key another
// program wrote, or another fleet's under a longer prefix.
func unescapeKey(name string) (_ string, ok bool) {
	if strings.Contains(name, prefixSeparator) {
		return "", false
	}
	if !strings.Contains(name, "%") {
		return name, true
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if name[i] != '%' {
			b.WriteByte(name[i])
			continue
		}
		switch {
		case strings.HasPrefix(name[i:], "%25"):
			b.WriteByte('%')
		case strings.HasPrefix(name[i:], "%2F"):
			b.WriteByte('/')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
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

// key is key's name in store.
func (p *prefixed) key(key string) string { return PrefixedKey(p.prefix, key) }

func (p *prefixed) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	return p.store.Get(ctx, p.key(key))
}

func (p *prefixed) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	return p.store.CompareAndSwap(ctx, p.key(key), old, value, ttl)
}

func (p *prefixed) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	return p.store.CompareAndDelete(ctx, p.key(key), old)
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
	names, next, err := l.List(ctx, p.key(prefix), cursor, limit)
	keys := names[:0]
	for _, n := range names {
		// Another fleet's key under a longer prefix, or one no Breaker
		// wrote through this prefix, is not this fleet's.
		if k, ok := unescapeKey(strings.TrimPrefix(n, p.prefix)); ok {
			keys = append(keys, k)
		}
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
	return r.Expiry(ctx, p.key(key))
}

// Follow follows the keys under the prefix that begin with prefix (of
// this store's keys), delivering them with the store's prefix removed and
// unescaped; a key under a longer prefix (another fleet's, which holds the
// separator) or one no Breaker wrote through this prefix is not delivered.
// It fails with errors.ErrUnsupported when the store cannot follow.
func (p *prefixed) Follow(ctx context.Context, prefix string, heartbeat time.Duration, fn func(driver.Change)) error {
	f, ok := p.store.(driver.Follower)
	if !ok {
		return fmt.Errorf("kvbreaker: follow: %T cannot follow its keys: %w", p.store, errors.ErrUnsupported)
	}
	if err := adapter.FollowArgs(heartbeat, fn); err != nil {
		return fmt.Errorf("kvbreaker: follow %q: %w", prefix, err)
	}
	return f.Follow(ctx, p.key(prefix), heartbeat, p.unprefix(fn))
}

// unprefix wraps fn to deliver keys with the store's prefix removed and
// unescaped, leaving out keys no Breaker wrote through this prefix.
func (p *prefixed) unprefix(fn func(driver.Change)) func(driver.Change) {
	return func(c driver.Change) {
		if c.Kind == driver.ChangePut || c.Kind == driver.ChangeDelete || c.Kind == driver.ChangeStale {
			k, ok := unescapeKey(strings.TrimPrefix(c.Key, p.prefix))
			if !ok || k == "" {
				return
			}
			c.Key = k
		}
		fn(c)
	}
}

// FollowDemand is Follow over a store that beats on demand
// (driver.DemandFollower); over any other follower it is Follow, which
// beats on its own whatever want says.
func (p *prefixed) FollowDemand(ctx context.Context, prefix string, heartbeat time.Duration, want <-chan struct{}, fn func(driver.Change)) error {
	df, ok := p.store.(driver.DemandFollower)
	if !ok {
		return p.Follow(ctx, prefix, heartbeat, fn)
	}
	return df.FollowDemand(ctx, p.key(prefix), heartbeat, want, p.unprefix(fn))
}

// demandFollows reports whether s beats on demand
// (driver.DemandFollower), for a Prefixed store whether its store does.
func demandFollows(s driver.Store) bool {
	if inner, _, ok := Unprefixed(s); ok {
		return demandFollows(inner)
	}
	_, ok := s.(driver.DemandFollower)
	return ok
}

// follows reports whether s can follow its keys: a driver.Follower, and
// for a Prefixed store one whose store can.
func follows(s driver.Store) bool {
	if inner, _, ok := Unprefixed(s); ok {
		return follows(inner)
	}
	_, ok := s.(driver.Follower)
	return ok
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
