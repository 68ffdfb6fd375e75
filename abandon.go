package kvbreaker

import (
	"context"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/machine"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

// Abandon releases the probe claim of v, a Probe verdict whose delivery was
// given up before it said anything about the host (the caller cancelled it,
// the worker is shutting down). Left in place, the claim holds every other
// delivery to host for RecoveryDelay (30 minutes by default) until another
// worker may take the probe over; released, the next Allow anywhere may
// probe at once.
//
// Abandon writes only while the stored record is still v's claim: if the
// probe was answered, another worker took it over, or the record changed
// otherwise, it writes nothing. It does nothing for a verdict that is not a
// Probe. Do and httpbreaker's Transport call it when a probe's outcome is
// Ignore; call it yourself after Allow when you give a probe up without
// recording an outcome. ctx bounds the store calls: pass one that is not
// already cancelled (context.WithoutCancel of the cancelled one).
func (b *Breaker) Abandon(ctx context.Context, host string, v Verdict) error {
	if v.Decision != Probe || v.claim.IsZero() {
		return nil
	}
	var st machine.Step
	_, err := b.run(ctx, host, b.instant(), true, func(r record.Record, now time.Time) machine.Step {
		return machine.AbandonStep(r, v.claim, now)
	}, &st)
	b.abandoned(ctx, host, err == nil && st.Write != machine.WriteNone)
	return wrap("abandon", host, err)
}
