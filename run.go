package kvbreaker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/machine"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

// decideFunc returns the step for record r at now. The run path puts it
// where its caller wants it (run's st) rather than returning it: a Step is
// over a hundred bytes, and the closed Allow's profile showed each copy of
// it up the path. (A func value may keep what it is given, so st is not
// passed to decide: it would move to the heap.)
type decideFunc func(r record.Record, now time.Time) machine.Step

// decider is what a decision was made on.
type decider uint8

const (
	byStore  decider = iota // a record read from (or written to) the store
	byCache                 // the decision cache
	byMirror                // the mirror
)

// trust is what run may do with the record it holds.
type trust uint8

const (
	// mustRead: nothing usable; the store is read.
	mustRead trust = iota
	// hintOnly: a compare-and-swap hint. A write decided on it is
	// checked by the store's compare-and-swap like any write; a "no
	// write" decided on it is confirmed by a read, since the store may
	// hold something else.
	hintOnly
	// decides: the source's record may answer a call that writes
	// nothing, without a store request.
	decides
	// stored: read from the store by this call, or returned by it.
	stored
)

// source is where run finds a host's record before the store, and what it
// teaches what the store said: the mirror while its feed is healthy
// (Settings.Mirror), else the cache (decisions for Allow with
// Settings.CacheSize, write hints on atomic stores). It is a value on
// run's stack, not an interface, so that Allow from a healthy mirror or
// the decision cache allocates nothing.
type source struct {
	b *Breaker
	m *mirror // nil: the cache
	// at is host's cache slot, hashed once per call (the cache only).
	at   slotRef
	mono time.Time
	// seq is what the mirror's install needs after a read of a host the
	// feed left unknown (unknown).
	seq     uint64
	unknown bool
	// sent is when this call's write was sent, for MirrorLag (the
	// mirror only).
	sent time.Time
}

// offer returns the record the source holds for host, and what it may
// decide.
func (s *source) offer(host string, in instant, write bool) (current, trust) {
	if m := s.m; m != nil {
		cur, seq, known := m.get(host)
		switch {
		case !known:
			// The feed said the host changed and nothing since told
			// what it holds: read it once, for this call and the
			// mirror.
			s.seq, s.unknown = seq, true
			return current{}, mustRead
		case write && cur.ver != driver.NoVersion && !in.wall.Before(cur.rec.RestrainedUntil):
			// Past its restraint, a record the mirror holds may have
			// expired in the store without a word (PostgreSQL sends
			// nothing until its purge): a Failure on it writes
			// nothing, where the store, holding no record, would
			// count it. While the restraint runs the record cannot
			// have expired: StateTTL outlasts RecoveryDelay.
			return cur, hintOnly
		}
		// The mirror is as current as the feed, which a read would
		// not improve on by more than the feed's delay: a decision that
		// writes nothing costs no store request, Allow's or a write
		// call's.
		return cur, decides
	}
	c := s.b.cache
	switch {
	case !write:
		if cur, ok := c.get(s.at, host, in.wall, in.mono); ok {
			return cur, decides
		}
	case s.b.traits.Atomic:
		// A non-atomic store cannot validate a hint: writes read first.
		// Without a hint the guess is "absent", which most hosts are (the
		// cache keeps no hint of an absent record, see cache.set); the
		// compare-and-swap checks it like any hint.
		if cur, ok := c.hint(s.at, host); ok {
			return cur, hintOnly
		}
		return current{}, hintOnly
	}
	return current{}, mustRead
}

// by is what a decision on a record of trust t was made on.
func (s *source) by(t trust) decider {
	switch {
	case t != decides:
		return byStore
	case s.m != nil:
		return byMirror
	}
	return byCache
}

// read reads host from the store and teaches the source what it found.
func (s *source) read(ctx context.Context, host string) (current, error) {
	if m := s.m; m != nil {
		cur, err := s.b.get(ctx, host)
		switch {
		case err != nil:
		case s.unknown:
			m.install(host, cur, s.seq)
			s.unknown = false
		default:
			m.learn(host, cur, cur.ver == driver.NoVersion, driver.NoVersion, time.Time{})
		}
		return cur, err
	}
	seq := s.at.reading()
	cur, err := s.b.get(ctx, host)
	if err != nil {
		s.b.cache.forget(s.at, host)
		return cur, err
	}
	s.b.cache.put(s.at, host, cur, seq, s.mono)
	return cur, nil
}

// sending marks a write about to be sent.
func (s *source) sending() {
	if s.m != nil {
		s.sent = time.Now()
	}
}

// wrote teaches the source the outcome of step st's write over prev:
// next is what the store holds when known (the write, or the record a
// conflict returned, see Breaker.apply).
func (s *source) wrote(host string, prev current, st *machine.Step, next current, known bool, err error) {
	if m := s.m; m != nil {
		switch {
		case err == nil:
			m.learn(host, next, st.Write == machine.WriteDelete, prev.ver, s.sent)
		case known || errors.Is(err, driver.ErrNotFound):
			m.learn(host, next, next.ver == driver.NoVersion, driver.NoVersion, time.Time{})
		}
		// Otherwise the outcome is unknown: the feed will tell.
		return
	}
	if known {
		s.b.cache.put(s.at, host, next, s.at.begin(), s.mono)
	} else {
		s.b.cache.forget(s.at, host)
	}
}

// run reads host's record and applies decide to it, retrying on conflicts
// with the store's current record. It puts the committed step in st and
// returns what it was decided on (the store, the cache or the mirror); the
// Observer's Transition hook fires after the write. After an error st means
// nothing (no caller reads it then).
//
// It is the one read-modify-write loop of every call, whatever the source
// (see source) offers first; its rules:
//
//   - A source's record may save a read, never decide a write: a write is a
//     compare-and-swap against the version the record came with, which the
//     store checks.
//   - What the source offers decides a call that writes nothing only as
//     far as its trust says: a write hint's "no write" is confirmed by a
//     read (a fresh decision cache entry answers Allow alone; the mirror
//     answers every call, but a write call on a record past its
//     restraint, which is a hint).
//   - What the store says teaches the source: a read, a write, and the
//     record a conflict returns; a conflict without one is read.
//
// decide is given the time to decide at: in.wall, or, for a write decided on
// a record read from the store after in.wall was taken, the clock read
// again. Otherwise a failure another worker stored between this call's
// clock read and its store read would look stamped by a fast clock, and the
// machine would clamp it back to in.wall (clampFuture): right in count,
// wrong in instant.
func (b *Breaker) run(ctx context.Context, host string, in instant, write bool, decide decideFunc, st *machine.Step) (decider, error) {
	if err := driver.ValidateKey(host); err != nil {
		return byStore, err
	}
	if b.clk.auto {
		b.maybeCheckClock(in.mono)
	}
	src := source{b: b, mono: in.mono}
	if b.mirror != nil && b.mirror.decides(ctx, in.mono) {
		src.m = b.mirror
	} else {
		src.at = b.cache.ref(host)
	}
	cur, t := src.offer(host, in, write)
	now := in.wall
	for range maxCASAttempts {
		if t == mustRead {
			var err error
			if cur, err = src.read(ctx, host); err != nil {
				return byStore, err
			}
			t = stored
		}
		*st = decide(cur.rec, now)
		if st.Write != machine.WriteNone && t == stored {
			if c := wall(b.clock()); c.After(now) {
				now = c
				*st = decide(cur.rec, now)
			}
		}
		// No record (a closed host, most hosts) holds no instant at all.
		if !cur.rec.IsZero() && b.cfg.Future(cur.rec, now) {
			b.anomaly(ctx, host, anomalyFuture, "restrained_until", cur.rec.RestrainedUntil, "newest_failure", cur.rec.Opened(), "now", now)
		}
		if st.Write == machine.WriteNone {
			if t == hintOnly {
				t = mustRead
				continue
			}
			return src.by(t), nil
		}
		src.sending()
		next, known, err := b.apply(ctx, host, cur, st)
		src.wrote(host, cur, st, next, known, err)
		switch {
		case err == nil:
			b.notify(ctx, host, st)
			return byStore, nil
		case errors.Is(err, driver.ErrNotFound):
			*st = machine.Step{From: record.StateClosed, To: record.StateClosed}
			return byStore, nil
		case errors.Is(err, driver.ErrConflict):
			cur, t = next, stored
			if !known {
				t = mustRead
			}
			continue
		}
		return byStore, err
	}
	return byStore, fmt.Errorf("%w: %d lost compare-and-swaps on %q", errContended, maxCASAttempts, host)
}
