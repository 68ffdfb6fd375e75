package skew

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// ErrRateLimited is matched by the error a Store returns for a write to a
// key sooner than Distortion.WriteInterval after the previous one (Workers
// KV answers such a write with HTTP 429).
var ErrRateLimited = errors.New("skew: write rate limit exceeded")

// Rounding says which way a TTL or expiry instant is quantised.
type Rounding int8

const (
	// Floor rounds down: the entry may live up to one granularity less
	// than asked. It is the worst case a declared Granularity allows.
	Floor Rounding = iota
	// Ceil rounds up, as the etcd and DynamoDB adapters do.
	Ceil
)

// String returns "floor" or "ceil".
func (r Rounding) String() string {
	if r == Ceil {
		return "ceil"
	}
	return "floor"
}

// Distortion is what a backend does to the TTLs and reads passing through
// it. The zero value distorts nothing: exact relative expiry, atomic
// compares, fresh reads.
type Distortion struct {
	// Kind says whose clock judges expiry: ExpiryRelative counts the TTL
	// down on the server's clock (the inner store's); ExpiryReaderFiltered
	// stores an absolute instant from the writer's clock and every reader
	// compares it with its own.
	Kind driver.ExpiryKind
	// Granularity quantises the TTL (relative) or the expiry instant
	// (reader-filtered), rounded by Round.
	Granularity time.Duration
	Round       Rounding
	// MinTTL raises shorter TTLs to it.
	MinTTL time.Duration
	// Early and Late move each entry's expiry earlier or later by up to
	// this much (Late only delays physical deletion for reader-filtered
	// stores, whose reads still filter on time).
	Early, Late time.Duration
	// Staleness: a Get may answer with the key's state up to this long
	// ago. Only writes made through the same Store are remembered.
	Staleness time.Duration
	// WriteInterval: a write to a key sooner than this after its last
	// write fails with ErrRateLimited.
	WriteInterval time.Duration
	// LastWriterWins makes compares a no-op: CompareAndSwap and
	// CompareAndDelete act on whatever is there.
	LastWriterWins bool
	// InProcess is declared as the store's Traits.InProcess (a simulated
	// memory store answers without I/O); it distorts nothing.
	InProcess bool
	// MaxClockSkew and MaxClockSkewOption are declared as the store's
	// Traits fields of the same names; they distort nothing (a
	// reader-filtered entry's physical copy outlasts its logical expiry by
	// far more than any skew here).
	MaxClockSkew       time.Duration
	MaxClockSkewOption string
	// Rand draws how early, late or stale each operation is: with
	// probability 1/3 an extreme (0 or the maximum), otherwise uniform.
	// Nil means always the worst case (Early and Staleness in full, Late
	// in full).
	Rand *rand.Rand
}

// FromTraits is the worst distortion a store declaring t may inflict:
// TTLs floored to the granularity, expiry up to Early early and Late late,
// reads up to ReadStaleness stale, writes rate-limited to
// MinWriteInterval, and last-writer-wins unless Atomic. rng draws each
// amount (nil: always the maximum).
func FromTraits(t driver.Traits, rng *rand.Rand) Distortion {
	m := t.Expiry
	return Distortion{
		Kind: m.Kind, Granularity: m.Granularity, Round: Floor, MinTTL: m.MinTTL,
		Early: m.Early, Late: m.Late, Staleness: t.ReadStaleness, WriteInterval: t.MinWriteInterval,
		LastWriterWins: !t.Atomic, InProcess: t.InProcess, Rand: rng,
		MaxClockSkew: t.MaxClockSkew, MaxClockSkewOption: t.MaxClockSkewOption,
	}
}

// Traits is what a store with this distortion should declare.
func (d Distortion) Traits() driver.Traits {
	return driver.Traits{
		Atomic:        !d.LastWriterWins,
		Expiry:        driver.ExpiryModel{Kind: d.Kind, Granularity: d.Granularity, MinTTL: d.MinTTL, Early: d.Early, Late: d.Late},
		ReadStaleness: d.Staleness, MinWriteInterval: d.WriteInterval,
		InProcess: d.InProcess, MaxClockSkew: d.MaxClockSkew, MaxClockSkewOption: d.MaxClockSkewOption,
	}
}

// Store distorts a real driver.Store (the inner store) shared by a simulated
// fleet. Each worker reaches it through a View with its own clock, which is
// the reader's and writer's clock for reader-filtered expiry. The inner
// store must judge expiry by true time (for backends/memory, give it the
// same true clock). Values are stored with an 8-byte header holding the
// logical expiry instant.
type Store struct {
	inner    driver.Store
	d        Distortion
	truth    func() time.Time
	declared *driver.Traits

	mu        sync.Mutex
	lastWrite map[string]time.Time
	history   map[string][]event
}

// event is a key's state from At (true time) on, for stale reads.
type event struct {
	at      time.Time
	value   []byte
	ver     driver.Version
	expires time.Time // logical expiry; zero: see physical
	phys    time.Time // true-time physical expiry
	absent  bool
}

// New wraps inner with distortion d. truth is true time (nil: time.Now,
// which inside a testing/synctest bubble is the bubble's fake time).
func New(inner driver.Store, d Distortion, truth func() time.Time) *Store {
	if truth == nil {
		truth = time.Now
	}
	return &Store{inner: inner, d: d, truth: truth, lastWrite: make(map[string]time.Time), history: make(map[string][]event)}
}

// Declare makes every View's Traits return t instead of the distortion's
// own traits: a store that under-states (or over-states) what it does.
func (s *Store) Declare(t driver.Traits) { s.declared = &t }

// View returns the store as seen by a worker whose clock is clock (nil:
// true time).
func (s *Store) View(clock func() time.Time) driver.Store {
	if clock == nil {
		clock = s.truth
	}
	return &view{s: s, clock: clock}
}

// draw picks an amount in [0, max]: max when Rand is nil; otherwise an
// extreme with probability 1/3, or uniform to the millisecond.
func (s *Store) draw(max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	rng := s.d.Rand
	if rng == nil {
		return max
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch rng.IntN(6) {
	case 0:
		return 0
	case 1:
		return max
	}
	if max < time.Millisecond {
		return time.Duration(rng.Int64N(int64(max) + 1))
	}
	return time.Duration(rng.Int64N(int64(max/time.Millisecond)+1)) * time.Millisecond
}

func quantise(d, g time.Duration, r Rounding) time.Duration {
	if g <= 0 {
		return d
	}
	q := d / g * g
	if r == Ceil && q < d {
		q += g
	}
	return q
}

// quantiseInstant rounds t to a multiple of g since the Unix epoch.
func quantiseInstant(t time.Time, g time.Duration, r Rounding) time.Time {
	if g <= 0 {
		return t
	}
	ns := t.UnixNano()
	q := ns / int64(g) * int64(g)
	if ns < 0 && q != ns {
		q -= int64(g)
	}
	if r == Ceil && q < ns {
		q += int64(g)
	}
	return time.Unix(0, q).In(t.Location())
}

type view struct {
	s     *Store
	clock func() time.Time
}

func (v *view) Traits() driver.Traits {
	if v.s.declared != nil {
		return *v.s.declared
	}
	return v.s.d.Traits()
}

func encode(expires time.Time, value []byte) []byte {
	b := make([]byte, 8, 8+len(value))
	if !expires.IsZero() {
		binary.BigEndian.PutUint64(b, uint64(expires.UnixNano()))
	}
	return append(b, value...)
}

func decode(b []byte) (time.Time, []byte, error) {
	if len(b) < 8 {
		return time.Time{}, nil, fmt.Errorf("skew: stored value has %d bytes, not a skew header", len(b))
	}
	var exp time.Time
	if ns := binary.BigEndian.Uint64(b); ns != 0 {
		exp = time.Unix(0, int64(ns))
	}
	return exp, b[8:], nil
}

// current is the key's live state as this view judges it: the physical
// version (for the inner compare), and the logical one (NoVersion when
// absent or expired by the reader's clock).
type current struct {
	phys    driver.Version
	logical driver.Version
	value   []byte
}

func (v *view) current(ctx context.Context, key string) (current, error) {
	b, ver, err := v.s.inner.Get(ctx, key)
	if errors.Is(err, driver.ErrNotFound) {
		return current{}, nil
	}
	if err != nil {
		return current{}, err
	}
	exp, value, err := decode(b)
	if err != nil {
		return current{}, err
	}
	c := current{phys: ver, logical: ver, value: value}
	if !exp.IsZero() && !v.clock().Before(exp) {
		c.logical, c.value = driver.NoVersion, nil
	}
	return c, nil
}

func (v *view) conflict(c current, inner error) error {
	return &driver.ConflictError{Value: c.value, Version: c.logical, Err: inner}
}

// Get implements driver.Store.
func (v *view) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("skew: get %q: %w", key, err)
	}
	if e, ok := v.s.stale(key, v.s.draw(v.s.d.Staleness)); ok {
		if e.absent || (!e.expires.IsZero() && !v.clock().Before(e.expires)) || !v.s.truth().Before(e.phys) {
			return nil, driver.NoVersion, driver.ErrNotFound
		}
		return append([]byte(nil), e.value...), e.ver, nil
	}
	c, err := v.current(ctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("skew: get %q: %w", key, err)
	}
	if c.logical == driver.NoVersion {
		return nil, driver.NoVersion, driver.ErrNotFound
	}
	return c.value, c.logical, nil
}

// stale returns the state a read lagging by lag sees, when it differs from
// the present one.
func (s *Store) stale(key string, lag time.Duration) (event, bool) {
	if lag <= 0 {
		return event{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.history[key]
	if len(h) == 0 {
		return event{}, false
	}
	at := s.truth().Add(-lag)
	for i := len(h) - 1; i >= 0; i-- {
		if !h[i].at.After(at) {
			if i == len(h)-1 {
				return event{}, false // nothing newer: read the present
			}
			return h[i], true
		}
	}
	// Before the first write we know of: the key was absent.
	return event{absent: true}, true
}

func (s *Store) remember(key string, e event) {
	if s.d.Staleness <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := append(s.history[key], e)
	// Forget what no read can lag back to any more (keep one older state).
	cut := e.at.Add(-s.d.Staleness)
	i := 0
	for i+1 < len(h) && h[i+1].at.Before(cut) {
		i++
	}
	s.history[key] = h[i:]
}

// admit applies the per-key write rate limit at true time now.
func (s *Store) admit(key string, now time.Time) error {
	if s.d.WriteInterval <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if last, ok := s.lastWrite[key]; ok && now.Sub(last) < s.d.WriteInterval {
		return fmt.Errorf("%w: %v since the last write, limit 1 per %v (HTTP 429)", ErrRateLimited, now.Sub(last), s.d.WriteInterval)
	}
	s.lastWrite[key] = now
	return nil
}

// CompareAndSwap implements driver.Store.
func (v *view) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("skew: put %q: %w", key, err)
	}
	if ttl <= 0 {
		return 0, fmt.Errorf("skew: put %q: ttl %v is not positive", key, ttl)
	}
	s, d := v.s, v.s.d
	now := s.truth()
	if err := s.admit(key, now); err != nil {
		return 0, fmt.Errorf("skew: put %q: %w", key, err)
	}
	eff := max(ttl, d.MinTTL)
	early, late := s.draw(d.Early), s.draw(d.Late)
	var expires time.Time
	var phys time.Duration
	switch d.Kind {
	case driver.ExpiryReaderFiltered:
		expires = quantiseInstant(v.clock().Add(eff), d.Granularity, d.Round).Add(-early)
		// The physical TTL outlasts the logical expiry by far, so reads
		// really do filter an expired-but-present entry.
		phys = 2*eff + d.Granularity + late + time.Minute
	default:
		phys = max(quantise(eff, d.Granularity, d.Round)-early+late, 1)
	}
	enc := encode(expires, value)
	for {
		c, err := v.current(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("skew: put %q: %w", key, err)
		}
		if !d.LastWriterWins && c.logical != old {
			return 0, v.conflict(c, nil)
		}
		ver, err := s.inner.CompareAndSwap(ctx, key, c.phys, enc, phys)
		if errors.Is(err, driver.ErrConflict) {
			if d.LastWriterWins {
				continue
			}
			// Someone wrote in between: report what is there now, unless
			// it is what the caller expected again (created and deleted
			// since, for old == NoVersion): a conflict naming the expected
			// version fits no order of the calls, so compare again.
			c, cerr := v.current(ctx, key)
			if cerr != nil {
				return 0, fmt.Errorf("skew: put %q: %w", key, cerr)
			}
			if c.logical == old {
				continue
			}
			return 0, v.conflict(c, err)
		}
		if err != nil {
			return 0, fmt.Errorf("skew: put %q: %w", key, err)
		}
		s.remember(key, event{at: now, value: append([]byte(nil), value...), ver: ver, expires: expires, phys: now.Add(phys)})
		return ver, nil
	}
}

// CompareAndDelete implements driver.Store.
func (v *view) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("skew: delete %q: %w", key, err)
	}
	s := v.s
	now := s.truth()
	admitted := false
	for {
		c, err := v.current(ctx, key)
		if err != nil {
			return fmt.Errorf("skew: delete %q: %w", key, err)
		}
		if c.logical == driver.NoVersion {
			return driver.ErrNotFound
		}
		if !s.d.LastWriterWins && c.logical != old {
			return v.conflict(c, nil)
		}
		if !admitted {
			if err := s.admit(key, now); err != nil {
				return fmt.Errorf("skew: delete %q: %w", key, err)
			}
			admitted = true
		}
		err = s.inner.CompareAndDelete(ctx, key, c.phys)
		switch {
		case err == nil:
			s.remember(key, event{at: now, absent: true})
			return nil
		case errors.Is(err, driver.ErrNotFound) && !s.d.LastWriterWins:
			return driver.ErrNotFound
		case errors.Is(err, driver.ErrConflict) && !s.d.LastWriterWins:
			// As in CompareAndSwap, the conflict must name another state
			// than the expected one: a key deleted since is not found.
			c, cerr := v.current(ctx, key)
			if cerr != nil {
				return fmt.Errorf("skew: delete %q: %w", key, cerr)
			}
			switch c.logical {
			case driver.NoVersion:
				return driver.ErrNotFound
			case old:
				continue
			}
			return v.conflict(c, err)
		case errors.Is(err, driver.ErrNotFound), errors.Is(err, driver.ErrConflict):
			continue
		}
		return fmt.Errorf("skew: delete %q: %w", key, err)
	}
}
