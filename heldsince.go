package kvbreaker

import (
	"context"
	"time"
)

type heldSinceKey struct{}

// WithHeldSince returns ctx carrying t, the instant a message was first held
// (HeldError.HeldSince, Verdict.HeldSince). Do and httpbreaker's Transport
// pass it to Allow: without it every retry of a held message counts as a
// fresh message, and HoldLimit never drops it.
func WithHeldSince(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, heldSinceKey{}, t)
}

// HeldSince returns the instant WithHeldSince put in ctx, or zero.
func HeldSince(ctx context.Context) time.Time {
	t, _ := ctx.Value(heldSinceKey{}).(time.Time)
	return t
}
