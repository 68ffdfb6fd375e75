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
	store *memory.Store
	last  Transition
	err   error
}

// NewKvbreaker builds a Breaker from s over a fresh memory store, both
// reading clock. The simulator must set clock to the instant it passes to
// every call. s.Clock and s.OnStateChange are replaced. The error is
// core.NewBreaker's when s is refused (for example a StateTTL below
// max(RecoveryDelay, FailureWindow) plus the store's margin).
func NewKvbreaker(s core.Settings, clock func() time.Time) (*Kvbreaker, error) {
	k := &Kvbreaker{store: memory.New(memory.WithClock(clock))}
	s.Clock = clock
	s.OnStateChange = func(_ string, from, to core.State) { k.last = Transition{From: from, To: to} }
	b, err := core.NewBreaker(k.store, s)
	if err != nil {
		return nil, err
	}
	k.b = b
	return k, nil
}

// Name returns "kvbreaker".
func (k *Kvbreaker) Name() string { return "kvbreaker" }

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

// Record returns host's stored record, if any.
func (k *Kvbreaker) Record(host string) (core.Record, bool) {
	st, err := k.b.Inspect(context.Background(), host)
	k.keep(err)
	return st.Record, st.Found
}
