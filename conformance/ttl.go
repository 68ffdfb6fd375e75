package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// realTimeLimit is the longest a TTL case waits in real time for one entry;
// beyond it the case needs a TimeAdvancer or LifetimeReporter.
const realTimeLimit = 20 * time.Second

// checkStateTTL checks expiry at the TTL a default Breaker writes (30 min
// 5 s): on the harness's clock, or through the physical lifetime the
// backend reports. It never waits that long: without either capability the
// promise is reported not verified.
func checkStateTTL(ctx context.Context, e *env) {
	long := e.opts.StateTTL
	what := "written with TTL " + long.String()
	lr, hasLR := e.h.(LifetimeReporter)
	_, hasAdv := e.h.(TimeAdvancer)
	if !hasLR && !hasAdv {
		e.notVerifiedf("expiry at TTL %v: the harness implements neither TimeAdvancer nor LifetimeReporter, and the suite does not wait %v", long, long)
		return
	}
	if hasLR {
		// Keys written in a row: a store that pools leases (etcd) puts the
		// later ones on an earlier key's lease, which must still cover
		// their whole TTL.
		for i := range 4 {
			key := fmt.Sprintf("state-ttl-%d.example", i)
			start := time.Now()
			if _, ok := e.create(ctx, key, val("state"), long); !ok {
				return
			}
			rem, ok := e.lifetime(ctx, lr, key, long, start, 0, PromiseStateTTL, PromiseStateTTL, what)
			if !ok {
				return
			}
			e.logf("%q %s: physical lifetime %v left %v after the write began", key, what, rem, time.Since(start).Round(time.Millisecond))
			if i < 3 && sleep(ctx, 300*time.Millisecond) != nil {
				return
			}
		}
		if !hasAdv && e.traits.Expiry.Kind == driver.ExpiryReaderFiltered {
			e.notVerifiedf("the logical expiry at TTL %v: a reader-filtered store's physical lifetime does not show when readers drop the entry; implement TimeAdvancer (moving the adapter's clock) to check it", long)
		}
	}
	if hasAdv {
		_, meas, ok := e.measure(ctx, expiring{key: "state-ttl.example", ttl: long, early: PromiseStateTTL, late: PromiseStateTTL})
		if ok {
			e.logf("TTL %v on the harness's clock: vanished between %v and %v after the write", long, meas.Min.Round(time.Millisecond), meas.Max.Round(time.Millisecond))
		}
	}
}

// update returns a write that creates key with ttl1, then overwrites it with
// ttl2: the write whose TTL must count.
func (e *env) update(key string, ttl1, ttl2 time.Duration) writeFunc {
	return func(ctx context.Context) (driver.Version, bool) {
		v1, ok := e.create(ctx, key, val("first"), ttl1)
		if !ok {
			return 0, false
		}
		v2, err := e.store.CompareAndSwap(ctx, key, v1, val("second"), ttl2)
		if err != nil {
			e.errorf(PromiseReplaceTTL, "CompareAndSwap(%q, %d) with the current version = %v", key, v1, err)
			return 0, false
		}
		return v2, true
	}
}

// checkReplaceTTL: an update's TTL replaces the creating write's, both ways
// (Redis KEEPTTL, etcd WithIgnoreLease, an UpdateItem that leaves the expiry
// attribute all keep the old one, and a record then vanishes while its
// restraint still runs).
func checkReplaceTTL(ctx context.Context, e *env) {
	short, long := e.opts.ExpiryTTL, e.opts.StateTTL
	lr, hasLR := e.h.(LifetimeReporter)
	_, hasAdv := e.h.(TimeAdvancer)
	relative := e.traits.Expiry.Kind == driver.ExpiryRelative

	// Longer: the entry must outlive the first TTL.
	key := "replace-longer.example"
	what := fmt.Sprintf("created with TTL %v, then updated with TTL %v", short, long)
	switch {
	case hasAdv:
		e.measure(ctx, expiring{key: key, ttl: long, write: e.update(key, short, long), early: PromiseReplaceTTL, late: PromiseReplaceTTL, what: what})
	case hasLR:
		start := time.Now()
		if _, ok := e.update(key, short, long)(ctx); ok {
			e.lifetime(ctx, lr, key, long, start, 0, PromiseReplaceTTL, PromiseReplaceTTL, what)
		}
		if !relative {
			e.notVerifiedf("a longer TTL on update, as readers see it: a reader-filtered store's physical lifetime does not show the logical expiry; implement TimeAdvancer")
		}
	default:
		// In real time: a second TTL whose earliest expiry is past the
		// first's latest, so keeping the first TTL shows.
		_, _, hi1 := e.windowFor(short)
		m := e.traits.Expiry
		second := hi1 + m.Early + m.Granularity + time.Second
		switch {
		case e.opts.SkipSlow:
			e.notVerifiedf("a longer TTL on update: waits %v in real time (skipped under -short; implement TimeAdvancer or LifetimeReporter)", second)
		case second > realTimeLimit:
			e.notVerifiedf("a longer TTL on update: the declared model (Late %v) needs a %v wait in real time to tell the TTLs apart; implement TimeAdvancer or LifetimeReporter", m.Late, second)
		default:
			what = fmt.Sprintf("created with TTL %v, then updated with TTL %v", short, second)
			e.measure(ctx, expiring{key: key, ttl: second, write: e.update(key, short, second), early: PromiseReplaceTTL, late: PromiseReplaceTTL, what: what})
		}
	}

	// Shorter: the entry must vanish by the second TTL.
	key = "replace-shorter.example"
	what = fmt.Sprintf("created with TTL %v, then updated with TTL %v", long, short)
	switch {
	case hasAdv:
		e.measure(ctx, expiring{key: key, ttl: short, write: e.update(key, long, short), early: PromiseReplaceTTL, late: PromiseReplaceTTL, what: what})
	case hasLR && relative:
		start := time.Now()
		if _, ok := e.update(key, long, short)(ctx); ok {
			e.lifetime(ctx, lr, key, short, start, 0, PromiseReplaceTTL, PromiseReplaceTTL, what)
		}
	case e.opts.SkipSlow:
		e.notVerifiedf("a shorter TTL on update: waits %v in real time (skipped under -short; implement TimeAdvancer)", short)
	default:
		e.measure(ctx, expiring{key: key, ttl: short, write: e.update(key, long, short), early: PromiseReplaceTTL, late: PromiseReplaceTTL, what: what})
	}
}

// checkOffGrid writes a TTL half a second off the whole seconds (2.5 s by
// default) at a random sub-second phase, and again half a second later, so
// a store that truncates or rounds TTLs or expiry instants to a unit coarser
// than its declared Granularity is caught from both sides: whatever the
// phase, one of the two writes lands at least half a second from the grid.
func checkOffGrid(ctx context.Context, e *env) {
	off := e.opts.ExpiryTTL + 500*time.Millisecond
	phase := time.Duration(rand.Int64N(1000)) * time.Millisecond
	if adv, ok := e.h.(TimeAdvancer); ok {
		// The backend's clock is the harness's: move it to the phase,
		// then half a second further for the second write.
		_ = adv
		first := e.advanced
		e.measure(ctx, expiring{key: "off-grid-a.example", ttl: off, early: PromiseOffGrid, late: PromiseOffGrid, advanceFirst: phase + time.Millisecond})
		since := (e.advanced - first - phase) % time.Second
		next := (1500*time.Millisecond - since) % time.Second
		e.measure(ctx, expiring{key: "off-grid-b.example", ttl: off, early: PromiseOffGrid, late: PromiseOffGrid, advanceFirst: next + time.Millisecond})
		e.logf("TTL %v written at backend-clock phases %v and about %v later", off, phase, 500*time.Millisecond)
		return
	}
	if e.opts.SkipSlow {
		e.notVerifiedf("TTL %v off the grid: waits in real time (skipped under -short; implement TimeAdvancer)", off)
		return
	}
	// Start at the phase past the next wall-clock second.
	now := time.Now()
	if sleep(ctx, now.Truncate(time.Second).Add(time.Second+phase).Sub(now)) != nil {
		return
	}
	var wg sync.WaitGroup
	for i, key := range []string{"off-grid-a.example", "off-grid-b.example"} {
		if i > 0 && sleep(ctx, 500*time.Millisecond) != nil {
			break
		}
		wg.Go(func() {
			e.measure(ctx, expiring{key: key, ttl: off, early: PromiseOffGrid, late: PromiseOffGrid})
		})
	}
	wg.Wait()
	e.logf("TTL %v written at wall-clock phases %v and %v", off, phase, (phase+500*time.Millisecond)%time.Second)
}

// checkSkewedReader: a store whose physical copy is padded past the logical
// expiry (Traits().MaxClockSkew > 0) must keep it for a reader whose clock
// is MaxClockSkew behind, which still counts the record live.
func checkSkewedReader(ctx context.Context, e *env) {
	pad := e.traits.MaxClockSkew
	if pad <= 0 {
		e.logf("not applicable: Traits().MaxClockSkew is 0 (the physical expiry is the logical one)")
		return
	}
	lr, hasLR := e.h.(LifetimeReporter)
	adv, hasAdv := e.h.(TimeAdvancer)
	sk, hasSk := e.h.(SkewedStoreMaker)
	if !hasLR && !(hasAdv && hasSk) {
		e.notVerifiedf("physical expiry for a reader %v behind: implement LifetimeReporter, or TimeAdvancer and SkewedStoreMaker", pad)
		return
	}
	if hasLR {
		for _, t := range []time.Duration{e.opts.ExpiryTTL, e.opts.StateTTL} {
			key := fmt.Sprintf("skewed-reader-%v.example", t)
			start := time.Now()
			if _, ok := e.create(ctx, key, val("padded"), t); !ok {
				return
			}
			e.lifetime(ctx, lr, key, t, start, pad, PromiseSkewedReader, PromiseSkewedReader, "written with TTL "+t.String())
		}
	}
	if !hasAdv || !hasSk {
		return
	}
	const key = "skewed-reader.example"
	long := e.opts.StateTTL
	reader, err := sk.MakeSkewedStore(ctx, e.raw, -pad)
	if err != nil || reader == nil {
		e.errorf(PromiseSkewedReader, "SkewedStoreMaker.MakeSkewedStore(%v) = %v, %v", -pad, reader, err)
		return
	}
	start := time.Now()
	ver, ok := e.create(ctx, key, val("padded"), long)
	if !ok {
		return
	}
	took := time.Since(start)
	if _, _, _, ok := e.awaitRead(ctx, PromiseRead, key, ver, val("padded")); !ok {
		return
	}
	eff, _, _ := e.windowFor(long)
	guard := 2*took + e.traits.Expiry.Granularity + time.Millisecond
	at := eff + pad - guard
	if err := e.advance(ctx, adv, at); err != nil {
		e.errorf(PromiseSkewedReader, "TimeAdvancer.Advance(%v) = %v", at, err)
		return
	}
	_, got, err := reader.Get(ctx, key)
	el := time.Since(start)
	switch {
	case errors.Is(err, driver.ErrNotFound) && at+el-pad >= eff:
		e.undecidedf("%q: the reader %v behind found it gone after %v advanced and %v of real time, past its logical expiry: the probe came too late to tell", key, pad, at, el.Round(time.Millisecond))
	case errors.Is(err, driver.ErrNotFound):
		e.errorf(PromiseSkewedReader, "%q written with TTL %v (effective %v): a reader whose clock is %v behind found it gone once the backend clock advanced %v (%v counting real time), while by its clock the record is live for %v more",
			key, long, eff, pad, at, (at + el).Round(time.Millisecond), (eff - (at + el - pad)).Round(time.Millisecond))
	case err != nil:
		e.errorf(PromiseSkewedReader, "the skewed reader's Get(%q) = %v", key, err)
	case got != ver:
		e.errorf(PromiseSkewedReader, "the skewed reader's Get(%q) returned version %d, want %d", key, got, ver)
	default:
		e.logf("%q written with TTL %v: a reader %v behind still reads it %v after the write (backend clock)", key, long, pad, at)
	}
}

// advance moves the harness's clock and counts it.
func (e *env) advance(ctx context.Context, adv TimeAdvancer, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	if err := adv.Advance(ctx, d); err != nil {
		return err
	}
	e.mu.Lock()
	e.advanced += d
	e.mu.Unlock()
	return nil
}
