package kvbreaker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/machine"
)

// defaultClockCheckInterval is how often a Breaker samples its store's clock
// in the background when Settings.ClockCheckInterval is zero.
const defaultClockCheckInterval = 10 * time.Minute

const (
	// checkSamples is how many samples CheckClock takes, one after another.
	checkSamples = 3
	// keptSamples bounds the samples the estimate is made from, as NTP's
	// clock filter keeps its last 8.
	keptSamples = 8
	// driftRate is how fast two clocks may drift apart (seconds per second):
	// NTP's PHI (RFC 5905, 15 ppm). An older sample's interval is widened
	// by its age times this, so that intersecting it with newer ones stays
	// sound while the offset slowly changes.
	driftRate = 15e-6
)

// clockSample is what one SampleClock showed: the offset (store − worker)
// lies in [lo, hi]; at is when the answer arrived, by the worker's clock.
type clockSample struct {
	lo, hi time.Duration
	at     time.Time
}

// clockCheck is a Breaker's clock-offset state.
type clockCheck struct {
	sampler driver.ClockSampler // nil: the store cannot show its clock
	skew    time.Duration       // Settings.ClockSkew, defaulted

	// Background checks (auto): scheduled by the monotonic clock from
	// start, so a wall-clock step (or a fake Settings.Clock) moves no check.
	auto     bool
	interval time.Duration
	start    time.Time
	next     atomic.Int64 // nanoseconds after start when the next check is due
	inflight atomic.Bool  // a background sample is running
	bgMu     sync.Mutex   // orders starts against Close: no wg.Add after Wait
	closed   bool
	wg       sync.WaitGroup
	ctx      context.Context // the background samples'; Close cancels it
	cancel   context.CancelFunc

	mu      sync.Mutex
	samples []clockSample // oldest first
	est     ClockOffset
	have    bool
	warned  bool
}

// initClock prepares clock checks for store, after the settings were
// validated.
func (b *Breaker) initClock(store driver.Store, s *Settings) {
	c := &b.clk
	c.sampler, _ = store.(driver.ClockSampler) // Prefixed passes it through
	c.skew = s.ClockSkew
	if c.skew == 0 {
		c.skew = machine.DefaultClockSkew
	}
	// An in-process store shares this process's clock; a sample would
	// show nothing and cost a goroutine.
	c.auto = c.sampler != nil && !s.SkipClockCheck && !b.traits.InProcess
	if !c.auto {
		return
	}
	c.interval = s.ClockCheckInterval
	if c.interval == 0 {
		c.interval = defaultClockCheckInterval
	}
	c.start = time.Now()
	// next is 0: the first store call starts the first check.
	c.ctx, c.cancel = context.WithCancel(context.Background())
}

// ClockOffset returns the current estimate of how far the store's clock is
// ahead of this worker's (Settings.Clock), and false when there is none yet:
// the store cannot show its clock (driver.ClockSampler), or no sample has
// succeeded. The estimate comes from CheckClock and the background checks
// (Settings.ClockCheckInterval).
func (b *Breaker) ClockOffset() (ClockOffset, bool) {
	b.clk.mu.Lock()
	defer b.clk.mu.Unlock()
	return b.clk.est, b.clk.have
}

// CheckClock samples the store's clock a few times now, updates the
// estimate ClockOffset returns and returns it. Each sample is one store
// call, bounded by CallTimeout within ctx. A store that cannot show its
// clock gives an error matching errors.ErrUnsupported; on any other error
// CheckClock returns the estimate as it stands (zero if none) with it.
//
// When the estimate proves the offset larger than Settings.ClockSkew (the
// whole interval Offset ± Uncertainty lies beyond it), the Breaker warns
// once through its Logger.
func (b *Breaker) CheckClock(ctx context.Context) (ClockOffset, error) {
	if b.clk.sampler == nil {
		return ClockOffset{}, fmt.Errorf("kvbreaker: check clock: store %T cannot show its clock (it is not a driver.ClockSampler): %w", b.store, errors.ErrUnsupported)
	}
	var o ClockOffset
	for range checkSamples {
		var err error
		if o, err = b.sampleClock(ctx, b.clock); err != nil {
			o, _ = b.ClockOffset()
			return o, err
		}
	}
	return o, nil
}

// sampleClock takes one sample, timed by now (the worker's clock), and folds
// it into the estimate.
func (b *Breaker) sampleClock(ctx context.Context, now func() time.Time) (ClockOffset, error) {
	ctx, cancel := b.callContext(ctx)
	defer cancel()
	ctx, done := b.storeCall(ctx, opSampleClock, "")
	sent := now()
	t, res, err := b.clk.sampler.SampleClock(ctx)
	received := now()
	end(done, err)
	if err != nil {
		return ClockOffset{}, fmt.Errorf("kvbreaker: check clock: %w", err)
	}
	if received.Before(sent) {
		// The worker's clock stepped back during the call: the round trip
		// bounds nothing.
		return ClockOffset{}, fmt.Errorf("kvbreaker: check clock: this worker's clock went back %v during the sample; try again", sent.Sub(received))
	}
	// The server read its clock at some instant between sent and received
	// (by the worker's clock), and its true reading lies in [t, t+res).
	s := clockSample{lo: t.Sub(received), hi: t.Add(max(res, 0)).Sub(sent), at: received}
	o, warn := b.clk.add(s)
	if b.obs.ClockOffset != nil {
		b.obs.ClockOffset(ctx, o)
	}
	if warn {
		b.warnClock(o)
	}
	return o, nil
}

// add folds s into the estimate and reports whether to warn now.
//
// The estimate is the intersection of the newest samples that agree (each
// widened by its age × driftRate), NTP's interval intersection rather than
// its minimum-delay pick: every sample's interval holds the true offset, so
// their intersection does too, and it is narrower than any one of them.
// That matters for stores whose clock reads to the second (an HTTP Date
// header): samples cut at different fractions of a second narrow each other
// below the resolution. A sample that does not overlap the newer ones means
// a clock stepped (NTP corrected one) since: it and every older sample are
// dropped.
func (c *clockCheck) add(s clockSample) (ClockOffset, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.samples = append(c.samples, s)
	if len(c.samples) > keptSamples {
		c.samples = c.samples[len(c.samples)-keptSamples:]
	}
	lo, hi := s.lo, s.hi
	keep := 1
	for i := len(c.samples) - 2; i >= 0; i-- {
		o := c.samples[i]
		age := s.at.Sub(o.at)
		if age < 0 {
			age = -age
		}
		widen := time.Duration(driftRate * float64(age))
		l, h := max(lo, o.lo-widen), min(hi, o.hi+widen)
		if l > h {
			break
		}
		lo, hi = l, h
		keep++
	}
	c.samples = append(c.samples[:0], c.samples[len(c.samples)-keep:]...)
	c.est = ClockOffset{Offset: lo + (hi-lo)/2, Uncertainty: (hi - lo + 1) / 2, At: s.at}
	c.have = true
	if !c.warned && (lo > c.skew || hi < -c.skew) {
		c.warned = true
		return c.est, true
	}
	return c.est, false
}

// warnClock says, once per Breaker, that the clock offset is proven beyond
// ClockSkew.
func (b *Breaker) warnClock(o ClockOffset) {
	dir := "behind"
	off := o.Offset
	if off < 0 {
		dir, off = "ahead of", -off
	}
	unit := time.Millisecond
	if o.Uncertainty < time.Millisecond {
		unit = time.Microsecond
	}
	b.log.Warn(fmt.Sprintf("kvbreaker: this worker's clock is %v ± %v %s the store's, more than Settings.ClockSkew (%v) assumes; TTL margins may be too short: fix the clock (NTP) or raise ClockSkew",
		off.Round(unit), o.Uncertainty.Round(unit), dir, b.clk.skew),
		"store", fmt.Sprintf("%T", b.store), "offset", o.Offset, "uncertainty", o.Uncertainty, "clock_skew", b.clk.skew)
}

// maybeCheckClock starts a background sample when one is due and none is
// running. It never waits: the caller's call goes on at once. mono is the
// call's reading of the monotonic clock (instant.mono): the clock is read
// once per call, not again here.
func (b *Breaker) maybeCheckClock(mono time.Time) {
	c := &b.clk
	if int64(mono.Sub(c.start)) < c.next.Load() || !c.inflight.CompareAndSwap(false, true) {
		return
	}
	c.bgMu.Lock()
	if c.closed {
		c.bgMu.Unlock()
		c.inflight.Store(false)
		return
	}
	c.next.Store(int64(time.Since(c.start) + c.interval))
	c.wg.Add(1)
	c.bgMu.Unlock()
	// Settings.Clock is read here, on the caller's goroutine, and the
	// sample is timed from it by the monotonic clock: a clock that is only
	// safe on the goroutines that call the Breaker (a test's per-worker
	// fake clock) is never read from another. Over one round trip the two
	// clocks advance alike.
	w0, m0 := b.clock(), time.Now()
	now := func() time.Time { return w0.Add(time.Since(m0)) }
	go func() {
		defer c.wg.Done()
		defer c.inflight.Store(false)
		// An error leaves the estimate as it was; the next check is due
		// after the interval all the same, so a store without a clock
		// command (a proxy that refuses TIME) costs one call per interval.
		_, _ = b.sampleClock(c.ctx, now)
	}()
}

// closeClock stops the background checks: it cancels a running sample and
// waits for it to end.
func (b *Breaker) closeClock() {
	c := &b.clk
	if !c.auto {
		return
	}
	c.bgMu.Lock()
	c.closed = true
	c.bgMu.Unlock()
	c.cancel()
	c.wg.Wait()
}
