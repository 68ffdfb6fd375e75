// Package model holds the breaker models the simulator compares: fedify's
// four-field record (the reference, [Fedify]), the design note's two-field
// record exactly as its pseudocode reads ([Seed]), and kvbreaker's own core
// behind the [Model] interface ([Kvbreaker]).
//
// Every model keeps its records in its own store with a TTL on the simulated
// clock, and every call is one atomic read-decide-write at one instant: in
// simulated time no other call can run between a model's read and its write,
// so compare-and-swap and last-writer-wins stores behave alike here. Races
// come from the simulator instead: a delivery's outcome is reported after its
// latency, when other workers may already have decided about the same host.
//
// The reference models are for differential testing only and are not part
// of kvbreaker's public API.
package model

import (
	"time"

	"github.com/kvbreaker/kvbreaker/core"
)

// Verdict is a model's answer to Allow.
type Verdict struct {
	Decision core.Decision
	// RetryAt is when a held message should ask again (Hold only).
	RetryAt time.Time
}

// Transition is a state change a model reported (fedify's onStateChange,
// kvbreaker's OnStateChange). The zero Transition is "no change".
type Transition struct {
	From, To core.State
}

// Changed reports whether t is a state change.
func (t Transition) Changed() bool { return t.From != t.To }

// String returns "from→to", or "none" when nothing changed.
func (t Transition) String() string {
	if !t.Changed() {
		return "none"
	}
	return t.From.String() + "→" + t.To.String()
}

// Model is a circuit breaker the simulator drives. The simulator passes the
// current simulated instant to every call and guarantees it never goes
// backwards.
type Model interface {
	// Name is the model's label in reports: "fedify-4field",
	// "seed-2field" or "kvbreaker".
	Name() string
	// Allow decides a delivery to host for a message first held at
	// heldSince (zero for a fresh message).
	Allow(host string, now, heldSince time.Time) (Verdict, Transition)
	// Failure reports that a delivery to host failed.
	Failure(host string, now time.Time) Transition
	// Success reports that host answered.
	Success(host string, now time.Time) Transition
	// Live reports whether host has a record that has not expired at now.
	Live(host string, now time.Time) bool
}

// ttlStore is a map of records with a TTL each, judged on the caller's
// instant: the key-value store under the reference models.
type ttlStore[R any] struct {
	m map[string]ttlEntry[R]
}

type ttlEntry[R any] struct {
	rec     R
	expires time.Time
}

func newTTLStore[R any]() ttlStore[R] { return ttlStore[R]{m: make(map[string]ttlEntry[R])} }

// get returns key's record unless it has expired at now (an expired entry is
// deleted, as a store that expires lazily would).
func (s *ttlStore[R]) get(key string, now time.Time) (R, bool) {
	e, ok := s.m[key]
	if !ok {
		var zero R
		return zero, false
	}
	if !now.Before(e.expires) {
		delete(s.m, key)
		var zero R
		return zero, false
	}
	return e.rec, true
}

func (s *ttlStore[R]) put(key string, rec R, now time.Time, ttl time.Duration) {
	s.m[key] = ttlEntry[R]{rec: rec, expires: now.Add(ttl)}
}

func (s *ttlStore[R]) del(key string) { delete(s.m, key) }

// holdRetry caps a hold's retry instant at the moment the message would be
// dropped, as fedify's capHeldRetryAt does.
func holdRetry(now, heldSince, retryAt time.Time, holdLimit time.Duration) time.Time {
	from := heldSince
	if from.IsZero() {
		from = now
	}
	if exp := from.Add(holdLimit); exp.Before(retryAt) {
		return exp
	}
	return retryAt
}

// holdExpired is the message-side drop rule every model shares: a message
// held for holdLimit is dropped without a store read.
func holdExpired(now, heldSince time.Time, holdLimit time.Duration) bool {
	return !heldSince.IsZero() && !heldSince.Add(holdLimit).After(now)
}
