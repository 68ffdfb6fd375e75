package kvbreaker

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrHeld is matched by the *HeldError Do returns when it did not run fn.
var ErrHeld = errors.New("kvbreaker: delivery held")

// HeldError says Do did not run fn because host's circuit is open (or the
// message reached its hold limit, Decision == Drop).
type HeldError struct {
	Host     string
	Decision Decision
	RetryAt  time.Time
}

func (e *HeldError) Error() string {
	if e.Decision == Drop {
		return fmt.Sprintf("kvbreaker: delivery to %q dropped: held for the hold limit", e.Host)
	}
	return fmt.Sprintf("kvbreaker: delivery to %q held until %s", e.Host, e.RetryAt.Format(time.RFC3339Nano))
}

// Is matches ErrHeld.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

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

// IsReachable reports whether err was marked with Reachable.
func IsReachable(err error) bool {
	_, ok := errors.AsType[reachableError](err)
	return ok
}

// Do runs fn as a delivery to host if the breaker allows it, and reports the
// outcome: nil is a Success, an error marked with Reachable a
// ReachableFailure, any other error a Failure. An error caused by ctx ending
// is not held against the host. When the circuit holds the delivery, Do
// returns a *HeldError (errors.Is(err, ErrHeld)) without running fn. Store
// errors are joined to fn's error; by default Do still runs fn when the store
// fails (see Settings.FailClosed).
func (b *Breaker) Do(ctx context.Context, host string, fn func(context.Context) error) error {
	v, storeErr := b.Allow(ctx, host, time.Time{})
	if v.Decision == Hold || v.Decision == Drop {
		return errors.Join(&HeldError{Host: host, Decision: v.Decision, RetryAt: v.RetryAt}, storeErr)
	}
	if errors.Is(storeErr, ErrInvalidKey) {
		return storeErr
	}
	err := fn(ctx)
	var outcome error
	switch {
	case err == nil:
		outcome = b.Success(ctx, host)
	case ctx.Err() != nil:
		// Our deadline or cancellation, not the host's fault.
	case IsReachable(err):
		outcome = b.ReachableFailure(ctx, host)
	default:
		outcome = b.Failure(ctx, host)
	}
	return errors.Join(err, storeErr, outcome)
}
