package conformance

import (
	"context"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

const (
	// clockSamples is how many samples the clock-sampler case takes in a
	// row.
	clockSamples = 5
	// maxClockResolution: a coarser reading bounds no offset that a
	// fleet's ClockSkew (seconds) could be judged by.
	maxClockResolution = time.Minute
	// clockSlack is how far readings may stray beyond what the round trips
	// and resolutions allow, as the expiry cases' grace: a server clock
	// slewed by NTP, or nodes whose clocks differ a little (a Redis Cluster
	// answers TIME from any node, DynamoDB from any front end).
	clockSlack = 250 * time.Millisecond
	// clockDriftRate is how fast two clocks may drift apart, the Breaker's
	// bound (NTP's PHI, 15 ppm).
	clockDriftRate = 15e-6
	// clockPrompt is how soon SampleClock must return once its context has
	// ended.
	clockPrompt = time.Second
	// clockCallTimeout bounds one sample on a live context.
	clockCallTimeout = 30 * time.Second
	// maxClockSpread bounds the real time the samples are spread over. To
	// prove that readings advance they must span more than resolution +
	// 2·slack; a clock too coarse for that leaves it not verified.
	maxClockSpread = 3 * time.Second
)

// clockReading is one SampleClock call: what it returned, and when it was
// sent and answered by this machine's clock.
type clockReading struct {
	t              time.Time
	res            time.Duration
	err            error
	panicked       any
	sent, received time.Time
}

// interval is the offset (store − this machine) the reading bounds, as a
// Breaker computes it: the server read its clock between sent and received,
// and its true reading lies in [t, t+res).
func (r clockReading) interval() (lo, hi time.Duration) {
	return r.t.Sub(r.received), r.t.Add(r.res).Sub(r.sent)
}

// sampleClock calls cs.SampleClock(ctx) on a goroutine of its own, timed by
// now, so that a sampler ignoring its context cannot hang the case: ok is
// false when it has not returned clockPrompt after ctx ended (the call is
// abandoned). A panic comes back in panicked: on that goroutine it would
// end the process.
func sampleClock(ctx context.Context, cs driver.ClockSampler, now func() time.Time) (r clockReading, ok bool) {
	ch := make(chan clockReading, 1)
	go func() {
		var a clockReading
		defer func() {
			a.received = now()
			if p := recover(); p != nil {
				a.panicked = p
			}
			ch <- a
		}()
		a.sent = now()
		a.t, a.res, a.err = cs.SampleClock(ctx)
	}()
	select {
	case r = <-ch:
		return r, true
	case <-ctx.Done():
	}
	tm := time.NewTimer(clockPrompt)
	defer tm.Stop()
	select {
	case r = <-ch:
		return r, true
	case <-tm.C:
		return clockReading{}, false
	}
}

// checkClockSampler holds a driver.ClockSampler to what a Breaker's offset
// estimate relies on, whatever the server's clock says: the offset itself
// is never judged (a live store's clock may legitimately differ from this
// machine's; kvbreaker check measures it separately).
func checkClockSampler(ctx context.Context, e *env) {
	cs, ok := e.raw.(driver.ClockSampler)
	if !ok {
		e.errorf(promiseClockSampler, "this store (%T) does not implement driver.ClockSampler, but the harness's first store did", e.raw)
		return
	}
	// This machine's wall clock as it stood when the case began, moved on
	// by the monotonic clock: a step of the machine's clock mid-case moves
	// no reading.
	w0 := time.Now()
	base := w0.Round(0)
	now := func() time.Time { return base.Add(time.Since(w0)) }

	// A canceled context first: a sampler that ignores it may hang on a
	// live one too, and this bounds the wait to clockPrompt.
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	r, ok := sampleClock(canceled, cs, now)
	switch {
	case !ok:
		e.errorf(promiseClockSampler, "SampleClock with a canceled context had not returned %v later", clockPrompt)
		return
	case r.panicked != nil:
		e.errorf(promiseNoPanic, "SampleClock with a canceled context panicked: %v", r.panicked)
		return
	case r.err == nil:
		e.errorf(promiseClockSampler, "SampleClock with a canceled context = %v, %v, nil; want an error", r.t, r.res)
	case !r.t.IsZero():
		e.errorf(promiseClockSampler, "SampleClock with a canceled context returned the time %v with its error (%v); want the zero time", r.t, r.err)
	}

	rs := make([]clockReading, 0, clockSamples)
	var gap time.Duration
	for i := range clockSamples {
		if i > 0 && sleep(ctx, gap) != nil {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, clockCallTimeout)
		r, ok := sampleClock(cctx, cs, now)
		ended := cctx.Err()
		cancel()
		switch {
		case !ok:
			e.errorf(promiseClockSampler, "sample %d: SampleClock had not returned %v after its context ended (%v)", i+1, clockPrompt, ended)
			return
		case r.panicked != nil:
			e.errorf(promiseNoPanic, "sample %d: SampleClock panicked: %v", i+1, r.panicked)
			return
		case r.err != nil:
			e.errorf(promiseClockSampler, "sample %d: SampleClock = %v", i+1, r.err)
			return
		}
		bad := false
		if r.t.IsZero() {
			e.errorf(promiseClockSampler, "sample %d: SampleClock returned the zero time (resolution %v)", i+1, r.res)
			bad = true
		}
		if r.res <= 0 || r.res > maxClockResolution {
			e.errorf(promiseClockSampler, "sample %d: SampleClock returned resolution %v; want more than 0 and at most %v", i+1, r.res, maxClockResolution)
			bad = true
		}
		if bad {
			return
		}
		if i == 0 {
			// Spread the samples so that a reading standing still falls
			// outside what real time allows by more than the slack.
			spread := r.res + 2*clockSlack
			if spread > maxClockSpread {
				e.notVerifiedf("that the readings advance: resolution %v is too coarse to see them move within the %v the case spreads its samples over", r.res, maxClockSpread)
				spread = maxClockSpread
			}
			gap = spread / (clockSamples - 1)
		}
		rs = append(rs, r)
	}

	failed := false
	for i := 1; i < len(rs); i++ {
		p, c := rs[i-1], rs[i]
		// The server's clock did not go back, so c's true reading, below
		// c.t+c.res, is at least p.t.
		if back := p.t.Sub(c.t); back > c.res {
			e.errorf(promiseClockSampler, "sample %d read %v, %v before sample %d's %v: the clock went back by more than its resolution (%v)", i+1, c.t, back, i, p.t, c.res)
			failed = true
		}
	}
	first, last := rs[0], rs[len(rs)-1]
	moved := last.t.Sub(first.t)
	// Between the two readings at least minElapsed and at most maxElapsed
	// passed here; each reading is its true one less up to its resolution.
	minElapsed, maxElapsed := last.sent.Sub(first.received), last.received.Sub(first.sent)
	drift := time.Duration(clockDriftRate * float64(maxElapsed))
	if hi := maxElapsed + first.res + drift + clockSlack; moved > hi {
		e.errorf(promiseClockSampler, "the readings advanced %v over %d samples while at most %v passed here: faster than real time by more than resolution %v and %v slack", moved, len(rs), maxElapsed, first.res, clockSlack)
		failed = true
	}
	if lo := minElapsed - last.res - drift - clockSlack; moved < lo {
		e.errorf(promiseClockSampler, "the readings advanced %v over %d samples while at least %v passed here: the clock stood still or ran slow, by more than resolution %v and %v slack", moved, len(rs), minElapsed, last.res, clockSlack)
		failed = true
	}
	if failed {
		return
	}

	// What a Breaker's estimate needs: every sample's offset interval holds
	// the true offset, so they overlap (each widened by the drift since).
	lo, hi := last.interval()
	loAt, hiAt := len(rs)-1, len(rs)-1
	for i := len(rs) - 2; i >= 0; i-- {
		l, h := rs[i].interval()
		w := time.Duration(clockDriftRate * float64(last.received.Sub(rs[i].received)))
		if l-w > lo {
			lo, loAt = l-w, i
		}
		if h+w < hi {
			hi, hiAt = h+w, i
		}
	}
	switch apart := lo - hi; {
	case apart > clockSlack:
		e.errorf(promiseClockSampler, "the samples bound no common offset: sample %d puts the store's clock at least %v from this machine's, sample %d at most %v; %v apart, more than the %v slack", loAt+1, lo, hiAt+1, hi, apart, clockSlack)
	case apart > 0:
		e.logf("the samples' offset intervals overlap only within the slack (samples %d and %d, %v apart): a server clock that stepped, or nodes whose clocks differ; a Breaker restarts its estimate then", loAt+1, hiAt+1, apart)
	default:
		e.logf("store clock − this machine's: %v ± %v from %d samples at resolution %v (not judged: the clocks may differ)", lo+(hi-lo)/2, (hi-lo+1)/2, len(rs), first.res)
	}
}
