package model

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

// procStore is one simulated process's view of the shared store: it counts
// the requests its Breaker sends, estimates the etcd lease grants its
// writes would need, and, when max > 0, is the process's decision cache.
//
// The decision cache mirrors core's (core/cache.go, Settings.CacheSize)
// rule for rule, on the simulated clock: an Allow may be answered from the
// record this process last read or wrote, while that was less than stale
// ago and the record's RestrainedUntil (if any) is still ahead; writes and
// the reads of Failure and Success always reach the store; this process's
// own writes and the current records a lost compare-and-swap returns update
// the entry at once; a full cache drops an arbitrary entry (here a random
// one, from its own seeded stream). core's cache cannot run here: it judges
// staleness by the real monotonic clock, which simulated time does not move.
// TestDecisionCacheMirrorsCore runs both on the same calls in a synctest
// bubble and compares every answer and request.
type procStore struct {
	driver.Store
	clock func() time.Time
	cost  Cost
	lease leaseEstimate

	max   int
	stale time.Duration
	rng   *rand.Rand
	// m holds entries by value: remember, called on most store calls,
	// then allocates nothing once a host has its slot.
	m    map[string]cacheEntry
	keys []string // m's keys, for random eviction

	// allow is set during an Allow; served is a copy of the entry that
	// answered it without a read, if any (a copy, because the Allow's own
	// write may replace the entry before the caller judges the answer).
	allow  bool
	served *cacheEntry
	copy   cacheEntry

	// mir, when set, is the process's mirror (WithMirror): it answers
	// every read, free; maxTTL is the store's cap, for when a write
	// expires. read: the call read (the mirror); wrote: its write reached
	// the store. The model sets both false before each call.
	mir    *mirror
	maxTTL time.Duration
	read   bool
	wrote  bool
}

// Traits are the store's, except that a Breaker deciding from a mirror is
// told the store is not atomic: it then reads (the mirror) before every
// write instead of writing on a remembered hint (see mirror.go).
func (s *procStore) Traits() driver.Traits {
	t := s.Store.Traits()
	if s.mir != nil {
		t.Atomic = false
	}
	return t
}

type cacheEntry struct {
	present bool
	value   []byte
	ver     driver.Version
	at      time.Time // when read or written
	until   time.Time // the record's RestrainedUntil
}

func (s *procStore) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	if s.mir != nil {
		e := s.mir.get(key, s.clock(), true)
		s.read = true
		if !e.present {
			return nil, driver.NoVersion, driver.ErrNotFound
		}
		return e.value, e.ver, nil
	}
	if s.allow && s.max > 0 {
		now := s.clock()
		if e, ok := s.m[key]; ok && now.Before(e.at.Add(s.stale)) && (e.until.IsZero() || now.Before(e.until)) {
			s.copy = e
			s.served = &s.copy
			if !e.present {
				return nil, driver.NoVersion, driver.ErrNotFound
			}
			return e.value, e.ver, nil
		}
	}
	s.cost.Reads++
	v, ver, err := s.Store.Get(ctx, key)
	switch {
	case err == nil:
		s.remember(key, true, v, ver)
	case errors.Is(err, driver.ErrNotFound):
		s.remember(key, false, nil, driver.NoVersion)
	}
	return v, ver, err
}

func (s *procStore) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	s.cost.Writes++
	if s.lease.grant(s.clock(), ttl) {
		s.cost.LeaseGrants++
	}
	ver, err := s.Store.CompareAndSwap(ctx, key, old, value, ttl)
	if err == nil {
		s.remember(key, true, value, ver)
		if s.maxTTL > 0 {
			ttl = min(ttl, s.maxTTL)
		}
		now := s.clock()
		s.committed(commit{at: now, key: key, present: true, value: value, ver: ver, expires: now.Add(ttl)})
	}
	s.conflict(key, err)
	s.lost(err)
	return ver, err
}

func (s *procStore) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	s.cost.Writes++
	err := s.Store.CompareAndDelete(ctx, key, old)
	if err == nil || errors.Is(err, driver.ErrNotFound) {
		s.remember(key, false, nil, driver.NoVersion)
	}
	if err == nil {
		s.committed(commit{at: s.clock(), key: key, ver: old})
	}
	if s.mir != nil && errors.Is(err, driver.ErrNotFound) {
		s.mir.current(key, false)
	}
	s.conflict(key, err)
	s.lost(err)
	return err
}

// lost counts a write that changed nothing (Cost.LostWrites).
func (s *procStore) lost(err error) {
	if errors.Is(err, driver.ErrConflict) || errors.Is(err, driver.ErrNotFound) {
		s.cost.LostWrites++
	}
}

// committed puts this process's write in its mirror at once, and in the
// feed that brings it to the others.
func (s *procStore) committed(c commit) {
	if s.mir == nil {
		return
	}
	s.wrote = true
	c.proc = s.mir.proc
	s.mir.own(s.mir.f.add(c))
}

// conflict caches, or mirrors, the current record a lost compare-and-swap
// returned.
func (s *procStore) conflict(key string, err error) {
	if ce, ok := errors.AsType[*driver.ConflictError](err); ok {
		s.remember(key, ce.Version != driver.NoVersion, ce.Value, ce.Version)
		if s.mir != nil {
			s.mir.current(key, ce.Version != driver.NoVersion)
		}
	}
}

func (s *procStore) remember(key string, present bool, v []byte, ver driver.Version) {
	if s.max <= 0 {
		return
	}
	// v is the store's copy (memory clones on Get) or the Breaker's
	// freshly encoded record, neither changed later: kept as is.
	e := cacheEntry{present: present, value: v, ver: ver, at: s.clock()}
	if present {
		if rec, err := record.DecodeRecord(v); err == nil {
			e.until = rec.RestrainedUntil
		}
	}
	if s.m == nil {
		s.m = make(map[string]cacheEntry)
	}
	if _, ok := s.m[key]; !ok {
		if len(s.m) >= s.max {
			i := s.rng.IntN(len(s.keys))
			delete(s.m, s.keys[i])
			s.keys[i] = s.keys[len(s.keys)-1]
			s.keys = s.keys[:len(s.keys)-1]
		}
		s.keys = append(s.keys, key)
	}
	s.m[key] = e
}

// leaseEstimate mirrors backends/etcd's lease pool (lease.go, reusePolicy
// with its defaults): a write reuses the pooled lease of its TTL when the
// lease outlives now+ttl, expires no later than now+ttl+slack (5% of the
// TTL, at most 60 s) and has carried fewer than 1,000 writes; otherwise
// one lease grant (a Raft proposal) makes a new one of ttl+slack.
type leaseEstimate struct {
	ttlSec   int64
	expires  time.Time
	attached int
}

// grant reports whether a write at now with ttl needs a lease grant.
func (l *leaseEstimate) grant(now time.Time, ttl time.Duration) bool {
	sec := int64((ttl + time.Second - 1) / time.Second)
	slack := max(0, min(int64(0.05*float64(sec)), 60))
	earliest := now.Add(time.Duration(sec) * time.Second)
	if l.ttlSec == sec && l.attached < 1000 && !l.expires.Before(earliest) && !l.expires.After(earliest.Add(time.Duration(slack)*time.Second)) {
		l.attached++
		return false
	}
	*l = leaseEstimate{ttlSec: sec, expires: now.Add(time.Duration(sec+slack) * time.Second), attached: 1}
	return true
}
