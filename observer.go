package kvbreaker

import (
	"context"
	"errors"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// Observer receives what a Breaker does, for metrics and traces: the module
// github.com/kvbreaker/kvbreaker/otelkvbreaker fills one for OpenTelemetry.
// Every field may be nil. Hooks run on the calling goroutine, inside the
// call they report, so they must be quick and must not call the Breaker.
// Without an Observer the Breaker pays one nil check per hook.
type Observer struct {
	// Decision is called once per Allow with its decision. cached reports
	// that the local cache (Settings.CacheSize) answered without a store
	// read.
	Decision func(ctx context.Context, host string, d Decision, cached bool)
	// Transition is called after this worker's write moved host's circuit,
	// as Settings.OnStateChange is.
	Transition func(ctx context.Context, host string, from, to State)
	// StoreCall is called before each call the Breaker makes to its store.
	// The context it returns is the call's (it may carry a span; nil keeps
	// ctx). The function it returns, if not nil, is called once the call
	// has returned, with its outcome and error.
	StoreCall func(ctx context.Context, op StoreOp, host string) (context.Context, func(StoreOutcome, error))
	// ClockOffset is called with each new estimate of the store's clock
	// offset (see Breaker.ClockOffset).
	ClockOffset func(ctx context.Context, o ClockOffset)
	// RecordAnomaly is called each time the Breaker reads a record it
	// cannot use as written (see RecordAnomaly); the Logger hears of it
	// once per host per 10 minutes.
	RecordAnomaly func(ctx context.Context, host string, a RecordAnomaly)
}

// StoreOp names a store call, in OpenTelemetry's attribute style.
type StoreOp string

// The store calls a Breaker makes.
const (
	OpGet              StoreOp = "get"
	OpCompareAndSwap   StoreOp = "compare_and_swap"
	OpCompareAndDelete StoreOp = "compare_and_delete"
	// OpSampleClock reads the store's clock (driver.ClockSampler).
	OpSampleClock StoreOp = "sample_clock"
)

// StoreOutcome classifies how a store call ended.
type StoreOutcome string

// The outcomes of a store call.
const (
	OutcomeOK StoreOutcome = "ok"
	// OutcomeNotFound: the key was absent (driver.ErrNotFound).
	OutcomeNotFound StoreOutcome = "not_found"
	// OutcomeConflict: a compare-and-swap or compare-and-delete found another
	// version (driver.ErrConflict).
	OutcomeConflict StoreOutcome = "conflict"
	// OutcomeTimeout: the call's deadline (Settings.CallTimeout or the
	// caller's) passed.
	OutcomeTimeout StoreOutcome = "timeout"
	// OutcomeCanceled: the caller's context was canceled.
	OutcomeCanceled StoreOutcome = "canceled"
	// OutcomeError: any other failure (the store is down, refused, corrupt).
	OutcomeError StoreOutcome = "error"
)

// ClockOffset is an estimate of how far the store's clock is ahead of this
// worker's (Settings.Clock); negative when it is behind. The true offset
// lies within Offset ± Uncertainty.
type ClockOffset struct {
	Offset      time.Duration
	Uncertainty time.Duration
	// At is when the estimate was last updated, by the worker's clock.
	At time.Time
}

// outcomeOf classifies a store call's error.
func outcomeOf(err error) StoreOutcome {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, driver.ErrNotFound):
		return OutcomeNotFound
	case errors.Is(err, driver.ErrConflict):
		return OutcomeConflict
	case errors.Is(err, context.DeadlineExceeded):
		return OutcomeTimeout
	case errors.Is(err, context.Canceled):
		return OutcomeCanceled
	}
	return OutcomeError
}

// storeCall starts observing one store call; end finishes it.
func (b *Breaker) storeCall(ctx context.Context, op StoreOp, host string) (context.Context, func(StoreOutcome, error)) {
	if b.obs == nil || b.obs.StoreCall == nil {
		return ctx, nil
	}
	c, done := b.obs.StoreCall(ctx, op, host)
	if c == nil {
		c = ctx
	}
	return c, done
}

func end(done func(StoreOutcome, error), err error) {
	if done != nil {
		done(outcomeOf(err), err)
	}
}

func (b *Breaker) decided(ctx context.Context, host string, d Decision, cached bool) {
	if b.obs != nil && b.obs.Decision != nil {
		b.obs.Decision(ctx, host, d, cached)
	}
}
