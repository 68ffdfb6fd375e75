package conformance

import (
	"context"
	"errors"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// windowFor is when, after a write with ttl, the declared model says the
// entry may vanish: not before lo, and by hi. eff is max(ttl, MinTTL).
func (e *env) windowFor(ttl time.Duration) (eff, lo, hi time.Duration) {
	m := e.traits.Expiry
	eff = max(ttl, m.MinTTL)
	lo = eff - m.Early - m.Granularity
	hi = eff + m.Granularity
	if m.Kind == driver.ExpiryRelative {
		// Reader-filtered reads drop the entry on time however late the
		// backend deletes it; relative expiry may show it until Late.
		hi += m.Late
	}
	return eff, lo, hi
}

// present polls once: true when key reads with version ver, false when
// absent. Any other answer is reported and ends the measurement, except,
// with stale set, an older version (a read within the declared staleness).
func (e *env) present(ctx context.Context, key string, ver driver.Version, stale ...bool) (bool, bool) {
	_, got, err := e.store.Get(ctx, key)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		return false, true
	case err != nil:
		e.errorf(promiseExpiredGet, "Get(%q) while waiting for it to expire = %v", key, err)
		return false, false
	case got != ver && len(stale) > 0 && stale[0]:
		return true, true
	case got != ver:
		e.errorf(promiseExpiredGet, "Get(%q) returned version %d while waiting for version %d to expire; nothing else wrote it", key, got, ver)
		return false, false
	}
	return true, true
}

// writeFunc makes the write whose expiry is measured and returns the version
// it stored (false: it failed, already reported).
type writeFunc func(ctx context.Context) (driver.Version, bool)

// expiring is one expiry measurement: the key, the TTL of the write that
// counts, how it is written, and the promises an early or late vanish
// breaks.
type expiring struct {
	key          string
	ttl          time.Duration
	write        writeFunc // nil: create key with ttl
	early, late  PromiseID // default "expiry-not-early", "expiry-not-late"
	what         string    // how the entry was written, for messages
	advanceFirst time.Duration
	// fine is the step past the earliest permitted end on the harness's
	// clock (default a tenth of the window, at least 10 ms).
	fine time.Duration
}

func (x *expiring) defaults(e *env) {
	if x.write == nil {
		x.write = func(ctx context.Context) (driver.Version, bool) { return e.create(ctx, x.key, val("expiring"), x.ttl) }
	}
	if x.early == "" {
		x.early = promiseNotEarly
	}
	if x.late == "" {
		x.late = promiseNotLate
	}
	if x.what == "" {
		x.what = "written with TTL " + x.ttl.String()
	}
}

// expire writes key with the expiry TTL and measures when it vanishes, in
// real time or by advancing the harness's clock.
func (e *env) expire(ctx context.Context, key string) (driver.Version, expiryMeasurement, bool) {
	return e.measure(ctx, expiring{key: key, ttl: e.opts.ExpiryTTL})
}

// measure makes x's write and measures when the entry vanishes, in real
// time or by advancing the harness's clock. It reports entries that vanish
// too early or too late, and returns the version written and whether the
// entry is now gone.
func (e *env) measure(ctx context.Context, x expiring) (driver.Version, expiryMeasurement, bool) {
	x.defaults(e)
	if adv, ok := e.h.(TimeAdvancer); ok {
		return e.measureAdvancing(ctx, adv, x)
	}
	eff, lo, hi := e.windowFor(x.ttl)
	meas := expiryMeasurement{TTL: x.ttl, Effective: eff}
	start := time.Now()
	ver, ok := x.write(ctx)
	ret := time.Now()
	if !ok {
		return 0, meas, false
	}
	interval := min(max(eff/50, 10*time.Millisecond), 250*time.Millisecond)
	grace := 2*interval + 250*time.Millisecond
	// Until the declared staleness has passed, an absent answer may just
	// be a read that has not caught up with the write.
	visible := ret.Add(e.traits.ReadStaleness)
	seen := false
	lastPresent := start
	for {
		s := time.Now()
		isPresent, ok := e.present(ctx, x.key, ver, s.Before(visible))
		r := time.Now()
		if !ok {
			return ver, meas, false
		}
		if !isPresent && !seen && s.Before(visible) {
			isPresent = true // not visible yet, not gone
		} else if isPresent {
			seen = true
		}
		if isPresent {
			lastPresent = s
			if s.Sub(ret) > hi+grace {
				meas.Min, meas.Max = s.Sub(ret), s.Sub(start)
				meas.Late = meas.Min - eff
				e.errorf(x.late, "%q %s (effective %v) is still present %v after the write; the declared model says it is gone by %v",
					x.key, x.what, eff, s.Sub(ret).Round(time.Millisecond), hi)
				return ver, meas, false
			}
		} else {
			meas.Min = max(0, lastPresent.Sub(ret))
			meas.Max = r.Sub(start)
			meas.Early = max(0, eff-meas.Max)
			meas.Late = max(0, meas.Min-eff)
			if meas.Max < lo {
				e.errorf(x.early, "%q %s (effective %v) vanished at most %v after the write; the declared model (Early %v, Granularity %v) keeps it for at least %v",
					x.key, x.what, eff, meas.Max.Round(time.Millisecond), e.traits.Expiry.Early, e.traits.Expiry.Granularity, lo)
			}
			if meas.Min > hi {
				e.errorf(x.late, "%q %s (effective %v) was still present %v after the write; the declared model says it is gone by %v",
					x.key, x.what, eff, meas.Min.Round(time.Millisecond), hi)
			}
			return ver, meas, true
		}
		if err := sleep(ctx, interval); err != nil {
			e.errorf(x.late, "%q: the case's deadline passed while waiting for expiry: %v", x.key, err)
			return ver, meas, false
		}
	}
}

// measureAdvancing measures x on the harness's clock. The backend's clock
// may or may not also run in real time, so after the write it has moved by
// between at (what was advanced) and at plus the real time since the write
// began. An entry is early only if it is gone while even that upper bound is
// below lo, so the probes approach lo in few, large steps, keeping the real
// time they take small.
func (e *env) measureAdvancing(ctx context.Context, adv TimeAdvancer, x expiring) (driver.Version, expiryMeasurement, bool) {
	eff, lo, hi := e.windowFor(x.ttl)
	meas := expiryMeasurement{TTL: x.ttl, Effective: eff, Advanced: true}
	if x.advanceFirst > 0 {
		// A phase for the write relative to the backend's clock.
		if err := e.advance(ctx, adv, x.advanceFirst); err != nil {
			e.errorf(x.late, "TimeAdvancer.Advance(%v) = %v", x.advanceFirst, err)
			return 0, meas, false
		}
	}
	start := time.Now()
	ver, ok := x.write(ctx)
	if !ok {
		return 0, meas, false
	}
	if _, _, _, ok := e.awaitRead(ctx, promiseRead, x.key, ver, nil); !ok {
		return ver, meas, false
	}
	// Approach lo in probes whose distance to it shrinks fourfold, down to
	// what keeps even the upper bound (advanced plus the real time since
	// the write began, with two more probes' worth) below lo: the real
	// time the approach takes is never counted as slack in the verdict.
	cost := time.Since(start) // a probe costs about a round trip or two
	at := time.Duration(0)
	// Past hi in steps of a tenth of the window, after the approach.
	fine := max((hi-lo)/10, 10*time.Millisecond)
	if x.fine > 0 {
		fine = x.fine
	}
	// How close below lo a probe must have found the entry for a vanish
	// at or after lo to show it was not early: the real-time path's poll
	// interval, or the fine step if that is wider. A loaded machine can
	// stop the approach further short (its margin is the real time the
	// probes take), and an entry that vanished in between may have been
	// early by any of it.
	resolution := max(fine, min(max(eff/50, 10*time.Millisecond), 250*time.Millisecond))
	gone := func(isPresent bool) (driver.Version, expiryMeasurement, bool, bool) {
		if isPresent {
			meas.Min = at
			return 0, meas, false, false
		}
		upTo := at + time.Since(start) // the most the backend's clock can have moved
		meas.Max = upTo
		meas.Early = max(0, eff-upTo)
		meas.Late = max(0, meas.Min-eff)
		switch {
		case upTo < lo:
			e.errorf(x.early, "%q %s (effective %v) was gone once the backend clock advanced %v (%v counting the real time since the write); the declared model keeps it for at least %v",
				x.key, x.what, eff, at, upTo.Round(time.Millisecond), lo)
			// The verdict is in; now measure how early, in coarse steps
			// on a second write of the same key.
			if g, ok := e.howEarly(ctx, adv, x, eff); ok && g < meas.Max {
				meas.Max = g
				meas.Early = max(0, eff-g)
			}
		case at < lo:
			e.undecidedf("%q %s: gone at a probe after %v advanced and %v of real time, which straddles the earliest permitted %v: not early only to within the real time",
				x.key, x.what, at, time.Since(start).Round(time.Millisecond), lo)
		case lo-meas.Min > resolution:
			e.undecidedf("%q %s: present after %v advanced, gone after %v: it may have vanished up to %v before the earliest permitted %v (the probes' real time kept the approach that far short; the check resolves %v)",
				x.key, x.what, meas.Min, at, (lo - meas.Min).Round(time.Millisecond), lo, resolution)
		}
		return ver, meas, true, true
	}
	for gap := min(lo/2, 10*time.Second); gap > 0; gap /= 4 {
		sound := time.Since(start) + 2*cost + time.Millisecond
		g := max(gap, sound)
		target := lo - g
		if target <= at {
			break
		}
		t0 := time.Now()
		if err := e.advance(ctx, adv, target-at); err != nil {
			e.errorf(x.late, "TimeAdvancer.Advance(%v) = %v", target-at, err)
			return ver, meas, false
		}
		at = target
		isPresent, ok := e.present(ctx, x.key, ver)
		cost = time.Since(t0)
		if !ok {
			return ver, meas, false
		}
		if v, m, okk, done := gone(isPresent); done {
			return v, m, okk
		}
		if g == sound {
			break
		}
	}
	// Then past hi.
	for {
		if at > hi {
			meas.Late = at - eff
			e.errorf(x.late, "%q %s (effective %v) is still present after advancing the backend clock %v; the declared model says it is gone by %v",
				x.key, x.what, eff, at, hi)
			return ver, meas, false
		}
		step := fine
		switch {
		case at < lo-fine:
			step = lo - at // the approach stopped short: straight to lo
		case x.fine > 0 && hi-at > 8*fine:
			// Fine steps only near hi: halve the distance to it.
			step = (hi - at) / 2
		}
		if err := e.advance(ctx, adv, step); err != nil {
			e.errorf(x.late, "TimeAdvancer.Advance(%v) = %v", step, err)
			return ver, meas, false
		}
		at += step
		isPresent, ok := e.present(ctx, x.key, ver)
		if !ok {
			return ver, meas, false
		}
		if v, m, okk, done := gone(isPresent); done {
			return v, m, okk
		}
	}
}

// howEarly writes x again and advances in steps of a fiftieth of eff until
// it is gone, returning the most the backend's clock can have moved by then
// (for the report; the verdict does not depend on it).
func (e *env) howEarly(ctx context.Context, adv TimeAdvancer, x expiring, eff time.Duration) (time.Duration, bool) {
	start := time.Now()
	ver, ok := x.write(ctx)
	if !ok {
		return 0, false
	}
	step := max(eff/50, time.Millisecond)
	for at := time.Duration(0); at <= eff; at += step {
		isPresent, ok := e.present(ctx, x.key, ver)
		if !ok {
			return 0, false
		}
		if !isPresent {
			return at + time.Since(start), true
		}
		if err := e.advance(ctx, adv, step); err != nil {
			return 0, false
		}
	}
	return 0, false
}

// lifetime checks, through the harness's LifetimeReporter, that key (just
// written with ttl by a call that began at start) is physically kept at
// least as long as the declared model says, plus pad, and (for relative
// expiry, where the physical lifetime is the logical one) no longer than
// TTL + Granularity + Late. It returns the remaining lifetime read.
func (e *env) lifetime(ctx context.Context, lr LifetimeReporter, key string, ttl time.Duration, start time.Time, pad time.Duration, early, late PromiseID, what string) (time.Duration, bool) {
	m := e.traits.Expiry
	eff := max(ttl, m.MinTTL)
	rem, err := lr.Lifetime(ctx, e.raw, key)
	el := time.Since(start)
	if err != nil {
		e.errorf(early, "LifetimeReporter.Lifetime(%q) right after it was %s = %v", key, what, err)
		return 0, false
	}
	lo := eff - el - m.Early - m.Granularity + pad
	if rem < lo {
		extra := ""
		if pad > 0 {
			extra = " plus the declared MaxClockSkew " + pad.String()
		}
		e.errorf(early, "%q %s (effective %v) has %v of physical lifetime left %v after the write began; the declared model (Early %v, Granularity %v%s) keeps it at least %v",
			key, what, eff, rem, el.Round(time.Millisecond), m.Early, m.Granularity, extra, lo.Round(time.Millisecond))
		return rem, false
	}
	if hi := eff + m.Granularity + m.Late; m.Kind == driver.ExpiryRelative && rem > hi {
		e.errorf(late, "%q %s (effective %v) has %v of physical lifetime left; the declared model (Granularity %v, Late %v) keeps it at most %v",
			key, what, eff, rem, m.Granularity, m.Late, hi)
		return rem, false
	}
	return rem, true
}

func checkExpiry(ctx context.Context, e *env) {
	_, meas, ok := e.expire(ctx, "expiry.example")
	if ok || meas.Max > 0 || meas.Min > 0 {
		e.rep.setExpiry(meas)
	}
	if ok {
		e.logf("TTL %v (effective %v): vanished between %v and %v after the write (early by %v, late by %v)",
			meas.TTL, meas.Effective, meas.Min.Round(time.Millisecond), meas.Max.Round(time.Millisecond), meas.Early.Round(time.Millisecond), meas.Late.Round(time.Millisecond))
	}
}

// checkExpiredAbsent lets an entry expire and then holds every operation to
// treating it as absent, whether or not the backend has deleted it yet
// (reader-filtered stores keep it for a while).
func checkExpiredAbsent(ctx context.Context, e *env) {
	const key = "expired.example"
	old, _, ok := e.expire(ctx, key)
	if !ok {
		return
	}
	if e.traits.Atomic {
		_, err := e.store.CompareAndSwap(ctx, key, old, val("resurrected"), ttl)
		if !errors.Is(err, driver.ErrConflict) {
			e.errorf(promiseExpiredCAS, "CompareAndSwap(%q, %d) with the expired entry's version = %v, want an error matching driver.ErrConflict", key, old, err)
		}
		e.checkConflict(err, key, driver.NoVersion, nil)
		if err := e.store.CompareAndDelete(ctx, key, old); !errors.Is(err, driver.ErrNotFound) {
			e.errorf(promiseExpiredDelete, "CompareAndDelete(%q, %d) with the expired entry's version = %v, want an error matching driver.ErrNotFound", key, old, err)
		}
	}
	ver, err := e.store.CompareAndSwap(ctx, key, driver.NoVersion, val("new"), ttl)
	if err != nil {
		e.errorf(promiseExpiredCAS, "CompareAndSwap(%q, NoVersion) after the entry expired = %v; create-only must succeed", key, err)
		return
	}
	if ver == old && e.traits.Atomic {
		e.errorf(promiseNoVersionReuse, "the entry created after %q expired got the expired entry's version %d", key, ver)
	}
	e.awaitRead(ctx, promiseExpiredGet, key, ver, val("new"))
}
