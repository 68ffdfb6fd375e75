package kvbreaker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// ErrHeld is matched by the *HeldError Do and httpbreaker's Transport return
// when the circuit holds a delivery: ask again at RetryAt.
var ErrHeld = errors.New("kvbreaker: delivery held")

// ErrDropped is matched by the *HeldError Do and httpbreaker's Transport
// return when a message held since HeldSince reached HoldLimit and was given
// up. It does not match ErrHeld, so a caller that retries held messages does
// not retry a dropped one.
var ErrDropped = errors.New("kvbreaker: delivery dropped: held for the hold limit")

// HeldError says a delivery was not made: the circuit holds it (Decision ==
// Hold; errors.Is(err, ErrHeld)) or the message reached its hold limit
// (Decision == Drop; errors.Is(err, ErrDropped)).
type HeldError struct {
	Host     string
	Decision Decision
	// RetryAt is when to ask again (Hold only).
	RetryAt time.Time
	// HeldSince is when the message was first held: pass it to
	// WithHeldSince on the retry's context so that HoldLimit applies.
	HeldSince time.Time
}

func (e *HeldError) Error() string {
	if e.Decision == Drop {
		return fmt.Sprintf("kvbreaker: delivery to %q dropped: held since %s, for the hold limit",
			e.Host, e.HeldSince.Format(time.RFC3339Nano))
	}
	return fmt.Sprintf("kvbreaker: delivery to %q held until %s", e.Host, e.RetryAt.Format(time.RFC3339Nano))
}

// Is matches ErrDropped for a Drop and ErrHeld otherwise.
func (e *HeldError) Is(target error) bool {
	if e.Decision == Drop {
		return target == ErrDropped
	}
	return target == ErrHeld
}

type reachableError struct{ err error }

func (e reachableError) Error() string { return e.err.Error() }
func (e reachableError) Unwrap() error { return e.err }

// Reachable marks err as a failure that proves the host is up (a 4xx, a
// rejected payload): Do then reports ReachableFailure, which closes the
// circuit, instead of Failure. Reachable(nil) is nil.
func Reachable(err error) error {
	if err == nil {
		return nil
	}
	return reachableError{err}
}

// isReachable reports whether err was marked with Reachable.
func isReachable(err error) bool {
	_, ok := errors.AsType[reachableError](err)
	return ok
}

// Do runs fn as a delivery to host if the breaker allows it, and records
// the outcome Classify gives fn's error: nil is a Success, an error marked
// with Reachable a ReachableFailure, an error once ctx was cancelled nothing
// (Ignore), and any other error, an expired deadline included, a Failure (a
// host that never answers shows itself only as a timeout). A probe whose
// outcome is Ignore is abandoned (see Abandon), so another worker may probe
// at once.
//
// When the circuit holds the delivery, Do returns a *HeldError
// (errors.Is(err, ErrHeld)) without running fn. Its HeldSince passed to
// WithHeldSince on the retry's context lets HoldLimit apply: once the
// message has been held that long Do returns a *HeldError matching
// ErrDropped, again without running fn. Store errors are joined to fn's
// error; by default Do still runs fn when the store fails (see
// Settings.FailClosed).
func (b *Breaker) Do(ctx context.Context, host string, fn func(context.Context) error) error {
	v, storeErr := b.Allow(ctx, host, HeldSince(ctx))
	if v.Decision == Hold || v.Decision == Drop {
		return errors.Join(&HeldError{Host: host, Decision: v.Decision, RetryAt: v.RetryAt, HeldSince: v.HeldSince}, storeErr)
	}
	if errors.Is(storeErr, driver.ErrInvalidKey) {
		return storeErr
	}
	err := fn(ctx)
	// ctx may have ended (a timeout is still recorded, a cancelled probe
	// still released); the Breaker bounds the store call by CallTimeout.
	rctx := context.WithoutCancel(ctx)
	var recErr error
	if o := Classify(ctx, err); o != Ignore {
		recErr = b.Record(rctx, host, o)
	} else if v.Decision == Probe {
		recErr = b.Abandon(rctx, host, v)
	}
	return errors.Join(err, storeErr, recErr)
}
