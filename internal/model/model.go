// Package model holds the breaker models the simulator compares: a Go model
// of fedify 2.3.x's CircuitBreaker with its four-field record (the
// reference, [Fedify]; not fedify itself, see TestAgainstFedify for what it
// is checked against), the design note's two-field record exactly as its
// pseudocode reads ([TwoField]), and kvbreaker's own core behind the [Model]
// interface ([Kvbreaker]).
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
	"strings"
	"time"

	"github.com/kvbreaker/kvbreaker"
)

// Verdict is a model's answer to Allow.
type Verdict struct {
	Decision kvbreaker.Decision
	// RetryAt is when a held message should ask again (Hold only).
	RetryAt time.Time
}

// Transition is a state change a model reported (fedify's onStateChange,
// kvbreaker's OnStateChange). The zero Transition is "no change".
type Transition struct {
	From, To kvbreaker.State
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
	// Name is the model's label in reports: "fedify-model",
	// "two-field" or "kvbreaker".
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
	// Restraint reports whether host's live record at now restrains it
	// (open or half-open) and until when: the instant the record would
	// answer Probe (open) or let a stale probe be taken over (half-open).
	Restraint(host string, now time.Time) (until time.Time, restrained bool)
}

// Option configures the store under a model.
type Option func(*storeOptions)

type storeOptions struct {
	maxTTL     time.Duration
	procs      int
	cacheSize  int
	cacheStale time.Duration
	mirror     bool
	delay      time.Duration
	// skipOwn is a mutant for tests: the mirror drops the process's own
	// writes.
	skipOwn bool
}

// WithProcesses makes a Kvbreaker model a fleet of n processes, each with
// its own Breaker (and decision cache), sharing one store. Other models
// ignore it: fedify's breaker keeps no process-local state.
func WithProcesses(n int) Option { return func(o *storeOptions) { o.procs = n } }

// WithDecisionCache gives every process of a Kvbreaker model a decision
// cache of size hosts, each record served for less than stale
// (Settings.CacheSize, CacheStaleness). Other models ignore it.
func WithDecisionCache(size int, stale time.Duration) Option {
	return func(o *storeOptions) { o.cacheSize, o.cacheStale = size, stale }
}

// WithMirror makes every process of a Kvbreaker model decide from a mirror
// of the shared store (Settings.Mirror over a driver.Follower), labelled
// "kvbreaker+mirror": each process's own writes enter its mirror at once,
// every other commit and every expiry delay after it happened (see
// mirror.go). Other models ignore it.
func WithMirror(delay time.Duration) Option {
	return func(o *storeOptions) { o.mirror, o.delay = true, delay }
}

// WithMaxStoreTTL makes the model's store expire every record at most d
// after its write, whatever TTL the breaker asked for: a store that keeps
// records for less time than the breaker needs (an eviction policy, a TTL
// ceiling, a misdeclared adapter), the failure mode of a store TTL below
// the restraint. The model's name gets "@ttl" and d appended.
func WithMaxStoreTTL(d time.Duration) Option { return func(o *storeOptions) { o.maxTTL = d } }

func applyOptions(opts []Option) storeOptions {
	var o storeOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// suffix is the name suffix for a capped store: "@ttl10m".
func (o storeOptions) suffix() string {
	if o.maxTTL <= 0 {
		return ""
	}
	return "@ttl" + ShortDuration(o.maxTTL)
}

// ShortDuration formats d without zero trailing units: 10m, 1h, 1h30m, 45s.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// ttlStore is a map of records with a TTL each, judged on the caller's
// instant: the key-value store under the reference models.
type ttlStore[R any] struct {
	m map[string]ttlEntry[R]
	// maxTTL, if positive, caps every TTL (WithMaxStoreTTL).
	maxTTL time.Duration
}

type ttlEntry[R any] struct {
	rec     R
	expires time.Time
}

func newTTLStore[R any](o storeOptions) ttlStore[R] {
	return ttlStore[R]{m: make(map[string]ttlEntry[R]), maxTTL: o.maxTTL}
}

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
	if s.maxTTL > 0 {
		ttl = min(ttl, s.maxTTL)
	}
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
