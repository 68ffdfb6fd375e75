package conformance

import (
	"context"
	"errors"
	"time"

	"github.com/kvbreaker/kvbreaker/core"
)

// window is when, after a write with the suite's expiry TTL, the declared
// model says the entry may vanish: not before lo, and by hi.
func (e *env) window() (ttl, eff, lo, hi time.Duration) {
	m := e.traits.Expiry
	ttl = e.opts.ExpiryTTL
	eff = max(ttl, m.MinTTL)
	lo = eff - m.Early - m.Granularity
	hi = eff + m.Granularity
	if m.Kind == core.ExpiryRelative {
		// Reader-filtered reads drop the entry on time however late the
		// backend deletes it; relative expiry may show it until Late.
		hi += m.Late
	}
	return ttl, eff, lo, hi
}

// present polls once: true when key reads with version ver, false when
// absent. Any other answer is reported and ends the measurement.
func (e *env) present(ctx context.Context, key string, ver core.Version) (bool, bool) {
	_, got, err := e.store.Get(ctx, key)
	switch {
	case errors.Is(err, core.ErrNotFound):
		return false, true
	case err != nil:
		e.errorf(promiseExpiredGet, "Get(%q) while waiting for it to expire = %v", key, err)
		return false, false
	case got != ver:
		e.errorf(promiseExpiredGet, "Get(%q) returned version %d while waiting for version %d to expire; nothing else wrote it", key, got, ver)
		return false, false
	}
	return true, true
}

// expire writes key with the expiry TTL and measures when it vanishes, in
// real time or by advancing the harness's clock. It reports entries that
// vanish too early or too late, and returns the version written and whether
// the entry is now gone.
func (e *env) expire(ctx context.Context, key string) (core.Version, ExpiryMeasurement, bool) {
	ttl, eff, lo, hi := e.window()
	meas := ExpiryMeasurement{TTL: ttl, Effective: eff}
	if adv, ok := e.h.(TimeAdvancer); ok {
		return e.expireAdvancing(ctx, adv, key, meas, lo, hi)
	}
	start := time.Now()
	ver, ok := e.create(ctx, key, val("expiring"), ttl)
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
		isPresent, ok := e.present(ctx, key, ver)
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
				e.errorf(promiseNotLate, "%q written with TTL %v (effective %v) is still present %v after the write; the declared model says it is gone by %v",
					key, ttl, eff, s.Sub(ret).Round(time.Millisecond), hi)
				return ver, meas, false
			}
		} else {
			meas.Min = max(0, lastPresent.Sub(ret))
			meas.Max = r.Sub(start)
			meas.Early = max(0, eff-meas.Max)
			meas.Late = max(0, meas.Min-eff)
			if meas.Max < lo {
				e.errorf(promiseNotEarly, "%q written with TTL %v (effective %v) vanished at most %v after the write; the declared model (Early %v, Granularity %v) keeps it for at least %v",
					key, ttl, eff, meas.Max.Round(time.Millisecond), e.traits.Expiry.Early, e.traits.Expiry.Granularity, lo)
			}
			if meas.Min > hi {
				e.errorf(promiseNotLate, "%q written with TTL %v (effective %v) was still present %v after the write; the declared model says it is gone by %v",
					key, ttl, eff, meas.Min.Round(time.Millisecond), hi)
			}
			return ver, meas, true
		}
		if err := sleep(ctx, interval); err != nil {
			e.errorf(promiseNotLate, "%q: the case's deadline passed while waiting for expiry: %v", key, err)
			return ver, meas, false
		}
	}
}

func (e *env) expireAdvancing(ctx context.Context, adv TimeAdvancer, key string, meas ExpiryMeasurement, lo, hi time.Duration) (core.Version, ExpiryMeasurement, bool) {
	meas.Advanced = true
	start := time.Now()
	ver, ok := e.create(ctx, key, val("expiring"), meas.TTL)
	if !ok {
		return 0, meas, false
	}
	// Coarse steps up to the earliest permitted instant, then fine ones
	// past the latest.
	coarse := max(meas.Effective/50, 10*time.Millisecond)
	fine := max((hi-lo)/10, 10*time.Millisecond)
	if _, _, _, ok := e.awaitRead(ctx, promiseRead, key, ver, val("expiring")); !ok {
		return ver, meas, false
	}
	at := time.Duration(0)
	for {
		isPresent, ok := e.present(ctx, key, ver)
		if !ok {
			return ver, meas, false
		}
		if !isPresent {
			// The backend's clock may also have run in real time since
			// the write: count that in before calling it early.
			upTo := at + time.Since(start)
			meas.Max = upTo
			meas.Early = max(0, meas.Effective-upTo)
			meas.Late = max(0, meas.Min-meas.Effective)
			if upTo < lo {
				e.errorf(promiseNotEarly, "%q written with TTL %v (effective %v) was gone once the backend clock advanced %v (%v in all); the declared model keeps it for at least %v",
					key, meas.TTL, meas.Effective, at, upTo.Round(time.Millisecond), lo)
			}
			return ver, meas, true
		}
		meas.Min = at
		if at > hi {
			meas.Late = at - meas.Effective
			e.errorf(promiseNotLate, "%q written with TTL %v (effective %v) is still present after advancing the backend clock %v; the declared model says it is gone by %v",
				key, meas.TTL, meas.Effective, at, hi)
			return ver, meas, false
		}
		step := fine
		if at+coarse < lo-fine {
			step = coarse
		}
		if err := adv.Advance(ctx, step); err != nil {
			e.errorf(promiseNotLate, "TimeAdvancer.Advance(%v) = %v", step, err)
			return ver, meas, false
		}
		at += step
	}
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
		if !errors.Is(err, core.ErrConflict) {
			e.errorf(promiseExpiredCAS, "CompareAndSwap(%q, %d) with the expired entry's version = %v, want an error matching core.ErrConflict", key, old, err)
		}
		e.checkConflict(err, key, core.NoVersion, nil)
		if err := e.store.CompareAndDelete(ctx, key, old); !errors.Is(err, core.ErrNotFound) {
			e.errorf(promiseExpiredDelete, "CompareAndDelete(%q, %d) with the expired entry's version = %v, want an error matching core.ErrNotFound", key, old, err)
		}
	}
	ver, err := e.store.CompareAndSwap(ctx, key, core.NoVersion, val("new"), ttl)
	if err != nil {
		e.errorf(promiseExpiredCAS, "CompareAndSwap(%q, NoVersion) after the entry expired = %v; create-only must succeed", key, err)
		return
	}
	if ver == old && e.traits.Atomic {
		e.errorf(promiseNoReuse, "the entry created after %q expired got the expired entry's version %d", key, ver)
	}
	e.awaitRead(ctx, promiseExpiredGet, key, ver, val("new"))
}
