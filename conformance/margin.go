package conformance

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker/skew"
)

// checkMargin runs skew's margin experiment on the store's declared traits:
// in simulated time, a fleet with clocks up to ±ClockSkew apart over a store
// distorted as badly as the declaration allows. At the required margin no
// probe may be demoted to a plain send; one millisecond below, the
// experiment must see demotions below the margin, or it has no power. The
// experiment uses an in-process store, not the adapter: it checks that the
// declaration and kvbreaker's margin fit together, while the expiry cases
// check the declaration against the real store.
func checkMargin(ctx context.Context, e *env) {
	p := skew.Profile{Name: "declared", Traits: e.traits}
	need := p.RequiredMargin(e.opts.ClockSkew)
	at, err := e.simulate(ctx, p, need)
	if err != nil {
		e.errorf(promiseMargin, "the experiment failed: %v", err)
		return
	}
	if at.Demoted > 0 {
		e.errorf(promiseMargin, "%v; first: %v", at, at.Examples)
	}
	below, err := e.simulate(ctx, p, need-time.Millisecond)
	if err != nil {
		e.errorf(promiseMargin, "the experiment failed: %v", err)
		return
	}
	e.logf("%v", at)
	e.logf("%v", below)
	// A pass at the required margin means something only if the same
	// experiment catches the demotions one tick below it.
	if below.Due == 0 || below.Demoted == 0 {
		e.errorf(promiseMarginPower, "%v: with no demotion below the margin, none at the margin proves nothing (the experiment needs more trials than it ran)", below)
	}
}

// simulate runs the experiment in a testing/synctest bubble under Run, or
// on a manual clock under Check.
func (e *env) simulate(ctx context.Context, p skew.Profile, margin time.Duration) (res skew.MarginResult, err error) {
	sim := skew.MarginSim{Profile: p, Skew: e.opts.ClockSkew, Margin: margin, Trials: e.opts.Trials, Seed: 1}
	if e.t == nil {
		return sim.Run(ctx)
	}
	synctest.Test(e.t, func(t *testing.T) {
		// The bubble runs on its own goroutine, out of reach of the
		// case's recover.
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("the experiment panicked: %v", p)
			}
		}()
		sim.Time = skew.SystemTime{}
		res, err = sim.Run(t.Context())
	})
	return res, err
}
