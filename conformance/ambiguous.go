package conformance

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/kvbreaker/kvbreaker"

	"github.com/kvbreaker/kvbreaker/driver"
)

// dropper returns the harness's AnswerDropper, or nil after noting why the
// case cannot run: an in-process store has no answer to lose (the promise
// does not apply); a networked one without the capability is not verified.
func (e *env) dropper() AnswerDropper {
	if d, ok := e.h.(AnswerDropper); ok {
		return d
	}
	if e.raw.Traits().InProcess {
		e.logf("not applicable: the store answers in process (Traits.InProcess), so no answer can be lost")
		return nil
	}
	e.notVerifiedf("writes whose answer is lost: the harness does not implement AnswerDropper (put a fault proxy, package conformance/faultproxy, between the client and the server)")
	return nil
}

// checkLostCAS: a compare-and-swap the backend applied but whose answer was
// lost, so the client (or its SDK) retried it, must report success (or an
// error saying the outcome is unknown), never a conflict with its own write.
func checkLostCAS(ctx context.Context, e *env) {
	d := e.dropper()
	if d == nil {
		return
	}
	const key = "lost-cas.example"
	v1, ok := e.create(ctx, key, val("v1"), ttl)
	if !ok {
		return
	}
	if err := d.DropNextAnswer(ctx); err != nil {
		e.errorf(promiseLostCAS, "AnswerDropper.DropNextAnswer = %v", err)
		return
	}
	v2, err := e.store.CompareAndSwap(ctx, key, v1, val("v2"), ttl)
	switch {
	case errors.Is(err, driver.ErrConflict):
		e.errorf(promiseLostCAS, "CompareAndSwap(%q, %d) whose answer was lost returned %v; the backend applied it, so the conflict is with the call's own write (Breaker would count its failure twice)", key, v1, err)
		return
	case err != nil:
		e.logf("CompareAndSwap whose answer was lost returned an error (outcome unknown, allowed): %v", err)
		e.awaitValue(ctx, promiseLostCAS, key, val("v2"))
		return
	}
	e.awaitRead(ctx, promiseLostCAS, key, v2, val("v2"))
}

// awaitValue checks that key holds value (the lost write was applied).
func (e *env) awaitValue(ctx context.Context, promise PromiseID, key string, value []byte) {
	deadline := time.Now().Add(e.traits.ReadStaleness)
	for {
		v, _, err := e.store.Get(ctx, key)
		if err == nil && string(v) == string(value) {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			e.errorf(promise, "Get(%q) = %q, %v after the write whose answer was lost; the backend applied %q", key, v, err, value)
			return
		}
		_ = sleep(ctx, 50*time.Millisecond)
	}
}

// checkLostDelete: likewise for a compare-and-delete: a retry that finds
// the key gone because of its own first attempt is a success.
func checkLostDelete(ctx context.Context, e *env) {
	d := e.dropper()
	if d == nil {
		return
	}
	const key = "lost-delete.example"
	ver, ok := e.create(ctx, key, val("doomed"), ttl)
	if !ok {
		return
	}
	if err := d.DropNextAnswer(ctx); err != nil {
		e.errorf(promiseLostDelete, "AnswerDropper.DropNextAnswer = %v", err)
		return
	}
	switch err := e.store.CompareAndDelete(ctx, key, ver); {
	case errors.Is(err, driver.ErrNotFound), errors.Is(err, driver.ErrConflict):
		e.errorf(promiseLostDelete, "CompareAndDelete(%q, %d) whose answer was lost returned %v; the backend applied it, so the key is gone by the call's own delete", key, ver, err)
	case err != nil:
		e.logf("CompareAndDelete whose answer was lost returned an error (outcome unknown, allowed): %v", err)
	}
	e.awaitRead(ctx, promiseLostDelete, key, driver.NoVersion, nil)
}

// armed is a store that arms the harness's AnswerDropper right before its
// next CompareAndSwap, so the answer lost is a Breaker's write.
type armed struct {
	driver.Store
	d   AnswerDropper
	mu  sync.Mutex
	on  bool
	err error
}

func (s *armed) arm() {
	s.mu.Lock()
	s.on = true
	s.mu.Unlock()
}

func (s *armed) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	s.mu.Lock()
	on := s.on
	s.on = false
	s.mu.Unlock()
	if on {
		if err := s.d.DropNextAnswer(ctx); err != nil {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
		}
	}
	return s.Store.CompareAndSwap(ctx, key, old, value, ttl)
}

// checkLostFailure: at Breaker level, a failure whose write was applied
// but whose answer was lost counts once: with a threshold of two, the
// circuit stays closed after it and opens at the next failure.
func checkLostFailure(ctx context.Context, e *env) {
	d := e.dropper()
	if d == nil {
		return
	}
	const host = "lost-failure.example"
	s := &armed{Store: e.store, d: d}
	b, err := kvbreaker.New(s, kvbreaker.Settings{
		FailureThreshold: 2,
		ClockSkew:        e.opts.ClockSkew,
		CallTimeout:      30*time.Second + e.traits.MinWriteInterval,
		Logger:           slog.New(slog.DiscardHandler),
	})
	if err != nil {
		e.errorf(promiseLostFailure, "kvbreaker.New over the store's declared traits: %v", err)
		return
	}
	decide := func() (kvbreaker.Decision, bool) {
		v, err := b.Allow(ctx, host, time.Time{})
		if err != nil {
			e.errorf(promiseLostFailure, "Allow(%q) = %v", host, err)
			return 0, false
		}
		return v.Decision, true
	}
	s.arm()
	if err := b.Failure(ctx, host); err != nil {
		e.logf("Failure whose write's answer was lost returned an error (outcome unknown, allowed): %v", err)
	}
	if s.err != nil {
		e.errorf(promiseLostFailure, "AnswerDropper.DropNextAnswer = %v", s.err)
		return
	}
	// The write was applied: wait until a read shows it.
	deadline := time.Now().Add(e.traits.ReadStaleness)
	for {
		_, _, err := e.store.Get(ctx, host)
		if err == nil || time.Now().After(deadline) || sleep(ctx, 50*time.Millisecond) != nil {
			break
		}
	}
	if dec, ok := decide(); !ok {
		return
	} else if dec != kvbreaker.Send {
		e.errorf(promiseLostFailure, "after one failure whose write's answer was lost, a threshold-2 Breaker decides %v, want %v: the failure was counted twice", dec, kvbreaker.Send)
		return
	}
	if err := b.Failure(ctx, host); err != nil {
		e.errorf(promiseLostFailure, "second Failure(%q) = %v", host, err)
		return
	}
	deadline = time.Now().Add(e.traits.ReadStaleness)
	for {
		dec, ok := decide()
		if !ok {
			return
		}
		if dec == kvbreaker.Hold {
			return
		}
		if time.Now().After(deadline) || sleep(ctx, 100*time.Millisecond) != nil {
			e.errorf(promiseLostFailure, "after a second failure a threshold-2 Breaker decides %v, want %v: the failure whose answer was lost was not counted at all", dec, kvbreaker.Hold)
			return
		}
	}
}
