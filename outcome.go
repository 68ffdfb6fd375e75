package kvbreaker

import (
	"context"
	"errors"
	"strconv"
)

// Outcome is what one delivery says about its host. Do classifies fn's
// error into one with Classify, and httpbreaker's Transport a response with
// its Classify; Record stores it.
type Outcome int8

const (
	// Success: the host answered as hoped; the circuit closes.
	Success Outcome = iota
	// ReachableFailure: the host answered, so it is up, but the delivery
	// failed (a 4xx, a rejected payload); the circuit closes.
	ReachableFailure
	// Failure: the host did not answer usefully (refused, reset, timed
	// out, 5xx); it counts towards opening the circuit.
	Failure
	// Ignore: the delivery says nothing about the host (the caller gave it
	// up); nothing is recorded.
	Ignore
)

// String returns "success", "reachable-failure", "failure" or "ignore".
func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case ReachableFailure:
		return "reachable-failure"
	case Failure:
		return "failure"
	case Ignore:
		return "ignore"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Classify is the outcome of a delivery made under ctx that returned err:
//   - nil is a Success;
//   - any error once ctx was cancelled (ctx.Err() is context.Canceled,
//     whatever context.Cause says: a sibling's failure in an errgroup, a
//     signal, a shutdown) is Ignore: the caller gave up, the host did not;
//   - an error marked with Reachable is a ReachableFailure;
//   - any other error is a Failure, an expired deadline included: a host
//     that does not answer within the time it was given is how a dead host
//     behind a black-holing network looks, and were deadlines ignored such
//     a host could never open the circuit.
//
// Do records this outcome, and httpbreaker's Transport applies the same
// rule to a request's context before its own Classify looks at the
// response, so one error means one thing in both. A probe whose outcome is
// Ignore has its claim released (see Breaker.Abandon).
func Classify(ctx context.Context, err error) Outcome {
	switch {
	case err == nil:
		return Success
	case errors.Is(ctx.Err(), context.Canceled):
		return Ignore
	case isReachable(err):
		return ReachableFailure
	}
	return Failure
}

// Record stores outcome o of a delivery to host: Success, ReachableFailure
// or Failure as the methods of those names do; Ignore stores nothing.
func (b *Breaker) Record(ctx context.Context, host string, o Outcome) error {
	switch o {
	case Success:
		return b.Success(ctx, host)
	case ReachableFailure:
		return b.ReachableFailure(ctx, host)
	case Failure:
		return b.Failure(ctx, host)
	}
	return nil
}
