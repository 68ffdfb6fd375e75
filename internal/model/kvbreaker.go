package model

import (
	"context"
	"errors"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/core"
)

// Kvbreaker is kvbreaker's core.Breaker over a memory store, both on the
// simulated clock, labelled "kvbreaker".
type Kvbreaker struct {
	b     *core.Breaker
	store core.Store
	name  string
	last  Transition
	err   error
}

// cappedStore is a memory store that expires every record at most maxTTL
// after its write while declaring memory's exact expiry (WithMaxStoreTTL):
// a store that breaks its declared Traits, which a Breaker cannot see.
type cappedStore struct {
	*memory.Store
	maxTTL time.Duration
}

func (s cappedStore) CompareAndSwap(ctx context.Context, key string, old core.Version, value []byte, ttl time.Duration) (core.Version, error) {
	return s.Store.CompareAndSwap(ctx, key, old, value, min(ttl, s.maxTTL))
}

// NewKvbreaker builds a Breaker from s over a fresh memory store, both
// reading clock. The simulator must set clock to the instant it passes to
// every call. s.Clock and s.OnStateChange are replaced. The error is
// core.NewBreaker's when s is refused (for example a StateTTL below
// max(RecoveryDelay, FailureWindow) plus the store's margin).
func NewKvbreaker(s core.Settings, clock func() time.Time, opts ...Option) (*Kvbreaker, error) {
	so := applyOptions(opts)
	mem := memory.New(memory.WithClock(clock))
	k := &Kvbreaker{store: mem, name: "kvbreaker" + so.suffix()}
	if so.maxTTL > 0 {
		k.store = cappedStore{Store: mem, maxTTL: so.maxTTL}
	}
	s.Clock = clock
	s.OnStateChange = func(_ string, from, to core.State) { k.last = Transition{From: from, To: to} }
	b, err := core.NewBreaker(k.store, s)
	if err != nil {
		return nil, err
	}
	k.b = b
	return k, nil
}

// Name returns "kvbreaker", with "@ttl" and the cap over a capped store.
func (k *Kvbreaker) Name() string { return k.name }

// Breaker returns the Breaker under test.
func (k *Kvbreaker) Breaker() *core.Breaker { return k.b }

// Err returns the first error a Breaker call returned, if any; with the
// memory store there should be none.
func (k *Kvbreaker) Err() error { return k.err }

func (k *Kvbreaker) keep(err error) {
	if err != nil && k.err == nil {
		k.err = err
	}
}

func (k *Kvbreaker) take() Transition {
	t := k.last
	k.last = Transition{}
	return t
}

// Allow implements Model; now is the clock's reading.
func (k *Kvbreaker) Allow(host string, _, heldSince time.Time) (Verdict, Transition) {
	v, err := k.b.Allow(context.Background(), host, heldSince)
	k.keep(err)
	return Verdict{Decision: v.Decision, RetryAt: v.RetryAt}, k.take()
}

// Failure implements Model.
func (k *Kvbreaker) Failure(host string, _ time.Time) Transition {
	k.keep(k.b.Failure(context.Background(), host))
	return k.take()
}

// Success implements Model.
func (k *Kvbreaker) Success(host string, _ time.Time) Transition {
	k.keep(k.b.Success(context.Background(), host))
	return k.take()
}

// Live implements Model: the store still holds an unexpired record.
func (k *Kvbreaker) Live(host string, _ time.Time) bool {
	_, _, err := k.store.Get(context.Background(), host)
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		k.keep(err)
	}
	return err == nil
}

// Restraint implements Model: the record's RestrainedUntil.
func (k *Kvbreaker) Restraint(host string, _ time.Time) (time.Time, bool) {
	rec, ok := k.Record(host)
	return rec.RestrainedUntil, ok && !rec.RestrainedUntil.IsZero()
}

// Record returns host's stored record, if any.
func (k *Kvbreaker) Record(host string) (core.Record, bool) {
	st, err := k.b.Inspect(context.Background(), host)
	k.keep(err)
	return st.Record, st.Found
}
