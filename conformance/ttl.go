package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
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
			rem, ok := e.lifetime(ctx, lr, key, long, start, 0, promiseStateTTL, promiseStateTTL, what)
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
		_, meas, ok := e.measure(ctx, expiring{key: "state-ttl.example", ttl: long, early: promiseStateTTL, late: promiseStateTTL})
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
			e.errorf(promiseReplaceTTL, "CompareAndSwap(%q, %d) with the current version = %v", key, v1, err)
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
		e.measure(ctx, expiring{key: key, ttl: long, write: e.update(key, short, long), early: promiseReplaceTTL, late: promiseReplaceTTL, what: what})
	case hasLR:
		start := time.Now()
		if _, ok := e.update(key, short, long)(ctx); ok {
			e.lifetime(ctx, lr, key, long, start, 0, promiseReplaceTTL, promiseReplaceTTL, what)
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
			e.measure(ctx, expiring{key: key, ttl: second, write: e.update(key, short, second), early: promiseReplaceTTL, late: promiseReplaceTTL, what: what})
		}
	}

	// Shorter: the entry must vanish by the second TTL.
	key = "replace-shorter.example"
	what = fmt.Sprintf("created with TTL %v, then updated with TTL %v", long, short)
	switch {
	case hasAdv:
		e.measure(ctx, expiring{key: key, ttl: short, write: e.update(key, long, short), early: promiseReplaceTTL, late: promiseReplaceTTL, what: what})
	case hasLR && relative:
		start := time.Now()
		if _, ok := e.update(key, long, short)(ctx); ok {
			e.lifetime(ctx, lr, key, short, start, 0, promiseReplaceTTL, promiseReplaceTTL, what)
		}
	case e.opts.SkipSlow:
		e.notVerifiedf("a shorter TTL on update: waits %v in real time (skipped under -short; implement TimeAdvancer)", short)
	default:
		e.measure(ctx, expiring{key: key, ttl: short, write: e.update(key, long, short), early: promiseReplaceTTL, late: promiseReplaceTTL, what: what})
	}
}

// offGridUnit is the unit the off-grid TTLs are phased in: the declared
// Granularity, at least a millisecond (no store is asked to keep time finer
// than the suite can measure).
func offGridUnit(t driver.Traits) time.Duration { return max(t.Expiry.Granularity, time.Millisecond) }

// offGridTTLs returns three TTLs 4 units apart, base + 10u·r + 1u, 5u and 9u
// for a random r: whatever grid of 10 units or coarser (10, 100, 250 ms, a
// second, for a store declaring a millisecond) a store rounds to, the TTL at
// 9u loses at least 9 units if it rounds down and the one at 1u gains at
// least 9 if it rounds up. A rounding of the expiry instant rather than the
// TTL is caught too: three instants 4 units apart cannot all lie within 4
// units past a line of a 10-unit grid.
func offGridTTLs(base, u time.Duration) [3]time.Duration {
	b := base + 10*u*time.Duration(rand.Int64N(100))
	return [3]time.Duration{b + u, b + 5*u, b + 9*u}
}

// checkOffGrid writes TTLs off every grid coarser than the declared
// Granularity and holds their lifetimes to it from both sides: early
// (rounded down) and late (rounded up beyond the granularity).
//
// Through a LifetimeReporter it checks TTLs near the StateTTL (30 min 5 s
// plus a random phase) without waiting. Then, for a store declaring less
// than 10 ms, it waits for three short TTLs a few milliseconds apart and
// times each one's end finely (polling tightly around it in real time, or
// advancing the harness's clock a unit at a time), so that the elapsed-time
// tolerance is a round trip, not the coarse polling of the expiry case. A
// coarser store gets a TTL half a second off the whole seconds, written at
// a random sub-second phase and again half a second later.
func checkOffGrid(ctx context.Context, e *env) {
	u := offGridUnit(e.traits)
	if lr, ok := e.h.(LifetimeReporter); ok {
		e.offGridLifetimes(ctx, lr, u)
	}
	if ctx.Err() != nil {
		return
	}
	if u < 10*time.Millisecond {
		e.offGridFine(ctx, u)
		return
	}
	e.offGridCoarse(ctx)
}

// offGridLifetimes writes TTLs near the StateTTL at phases off every grid
// and checks the physical lifetime each one gets.
func (e *env) offGridLifetimes(ctx context.Context, lr LifetimeReporter, u time.Duration) {
	ttls := offGridTTLs(e.opts.StateTTL, u)
	var got []string
	for i, t := range ttls {
		key := fmt.Sprintf("off-grid-lifetime-%d.example", i)
		start := time.Now()
		if _, ok := e.create(ctx, key, val("off grid"), t); !ok {
			return
		}
		rem, ok := e.lifetime(ctx, lr, key, t, start, 0, promiseOffGrid, promiseOffGrid, "written with TTL "+t.String())
		if !ok {
			return
		}
		got = append(got, fmt.Sprintf("TTL %v: %v left %v after the write began", t, rem, time.Since(start).Round(time.Microsecond)))
	}
	e.logf("physical lifetimes of TTLs %v apart: %s", 4*u, strings.Join(got, "; "))
}

// offGridFine waits for three TTLs a few units apart, off every coarser
// grid, and times their ends finely.
func (e *env) offGridFine(ctx context.Context, u time.Duration) {
	ttls := offGridTTLs(e.opts.ExpiryTTL, u)
	if _, ok := e.h.(TimeAdvancer); ok {
		for i, t := range ttls {
			// A random phase of the write on the backend's clock.
			phase := time.Duration(rand.Int64N(int64(10*u))) + u
			key := fmt.Sprintf("off-grid-%d.example", i)
			// A queuing store (driver.Flusher) sends the write, and reads
			// the clock its TTL starts from, after the call returned:
			// flushed, it has, and a unit late is the store's.
			write := func(ctx context.Context) (driver.Version, bool) {
				ver, ok := e.create(ctx, key, val("off grid"), t)
				return ver, ok && e.flush(ctx, promiseOffGrid)
			}
			x := expiring{key: key, ttl: t, write: write, early: promiseOffGrid, late: promiseOffGrid, advanceFirst: phase, fine: u}
			if _, meas, ok := e.measure(ctx, x); ok {
				e.logf("TTL %v on the harness's clock: vanished between %v and %v after the write", t, meas.Min, meas.Max)
			}
		}
		return
	}
	if e.opts.SkipSlow {
		e.notVerifiedf("TTLs %v, %v and %v off every grid coarser than %v: waits in real time (skipped under -short; implement TimeAdvancer)", ttls[0], ttls[1], ttls[2], u)
		return
	}
	// In real time the tolerance is what the machine gives: a round that
	// could not tell the grid (a loaded machine that did not run the
	// poller for a while) is tried again, on shorter TTLs, which the
	// millisecond phases need no more than the expiry case's.
	base := max(e.traits.Expiry.MinTTL, 500*time.Millisecond)
	var res time.Duration
	for round := range 3 {
		var ok bool
		if res, ok = e.edges(ctx, round, offGridTTLs(base, u), u); !ok || res < 8*u {
			return
		}
	}
	e.undecidedf("rounding to a grid of %v: in three rounds the write's round trip and the gap between polls (last %v) were too long to tell", 10*u, res.Round(time.Microsecond))
}

// edge is one entry whose end offGridFine times.
type edge struct {
	key         string
	ttl         time.Duration
	ver         driver.Version
	start, ret  time.Time // the write's call and return
	eff, lo, hi time.Duration
	lastPresent time.Time
	gap         time.Duration // the longest wait between two Gets near an end
	last        time.Time
	done        bool
	seen        bool
}

// edgeWindow is how close to an entry's earliest or latest permitted end
// the suite polls it tightly.
const edgeWindow = 15 * time.Millisecond

// edges writes an entry per TTL, one right after the other, and polls each
// tightly around its earliest and latest permitted ends: a Get that finds
// it absent having returned before start+lo shows it ended early; one that
// finds it present having been issued after ret+hi shows it ended late.
// The tolerance is the write's round trip and the gap between two Gets.
//
// It returns that tolerance, and false once it reported a problem (or
// could not finish).
func (e *env) edges(ctx context.Context, round int, ttls [3]time.Duration, u time.Duration) (time.Duration, bool) {
	var es []*edge
	for i, t := range ttls {
		x := &edge{key: fmt.Sprintf("off-grid-%d-%d.example", round, i), ttl: t}
		x.eff, x.lo, x.hi = e.windowFor(t)
		x.start = time.Now()
		ver, ok := e.create(ctx, x.key, val("off grid"), t)
		x.ret = time.Now()
		if !ok {
			return 0, false
		}
		x.ver, x.lastPresent = ver, x.start
		es = append(es, x)
	}
	for {
		var next time.Time // the earliest a pending entry needs polling
		polled, pending := false, false
		for _, x := range es {
			if x.done {
				continue
			}
			pending = true
			now := time.Now()
			near := func(at time.Duration) bool {
				return now.After(x.start.Add(at-edgeWindow)) && now.Before(x.ret.Add(at+edgeWindow))
			}
			due := x.start.Add(x.lo - edgeWindow)
			if !near(x.lo) && !near(x.hi) && now.Sub(x.last) < 5*time.Millisecond {
				if now.Before(due) {
					due = x.last.Add(5 * time.Millisecond)
				}
				if next.IsZero() || due.Before(next) {
					next = due
				}
				continue
			}
			if !e.edgePoll(ctx, x) {
				return 0, false
			}
			polled = true
		}
		if !pending {
			break
		}
		if ctx.Err() != nil {
			e.errorf(promiseOffGrid, "the case's deadline passed while waiting for expiry: %v", ctx.Err())
			return 0, false
		}
		if !polled {
			// Far from every end: sleep, waking a little early.
			_ = sleep(ctx, min(time.Until(next), 5*time.Millisecond))
			continue
		}
		runtime.Gosched()
	}
	var got []string
	res := time.Duration(0)
	for _, x := range es {
		got = append(got, fmt.Sprintf("TTL %v vanished between %v and %v after the write", x.ttl, x.lastPresent.Sub(x.ret).Round(time.Microsecond), x.last.Sub(x.start).Round(time.Microsecond)))
		res = max(res, x.ret.Sub(x.start)+x.gap)
	}
	e.logf("TTLs %v apart, timed to within %v: %s", 4*u, res.Round(time.Microsecond), strings.Join(got, "; "))
	e.mu.Lock()
	clean := len(e.problems) == 0
	e.mu.Unlock()
	return res, clean
}

// edgePoll reads x once; false ends the measurement (reported).
func (e *env) edgePoll(ctx context.Context, x *edge) bool {
	s := time.Now()
	if !x.last.IsZero() && s.Sub(x.ret) > x.lo-edgeWindow {
		x.gap = max(x.gap, s.Sub(x.last))
	}
	visible := x.ret.Add(e.traits.ReadStaleness)
	isPresent, ok := e.present(ctx, x.key, x.ver, s.Before(visible))
	r := time.Now()
	x.last = r
	if !ok {
		return false
	}
	if !isPresent && !x.seen && s.Before(visible) {
		return true // not visible yet, not gone
	}
	if isPresent {
		x.seen = true
		x.lastPresent = s
		if s.Sub(x.ret) > x.hi {
			e.errorf(promiseOffGrid, "%q written with TTL %v (effective %v) was still present %v after the write returned; the declared model (Granularity %v, Late %v) says it is gone by %v",
				x.key, x.ttl, x.eff, s.Sub(x.ret).Round(time.Microsecond), e.traits.Expiry.Granularity, e.traits.Expiry.Late, x.hi)
			x.done = true
		}
		return true
	}
	x.done = true
	if el := r.Sub(x.start); el < x.lo {
		// A store on this machine expires by its wall clock; when that
		// stepped forward past the lifetime while the monotonic clock
		// measured less, the store kept its promise by its own clock.
		if wall := r.Round(0).Sub(x.start.Round(0)); wall >= x.lo {
			e.undecidedf("%q written with TTL %v (effective %v) was gone %v after the write began by the monotonic clock, %v by the wall clock, which stepped %v forward meanwhile: the lifetime cannot be told from the step",
				x.key, x.ttl, x.eff, el.Round(time.Microsecond), wall.Round(time.Microsecond), (wall - el).Round(time.Microsecond))
			return true
		}
		e.errorf(promiseOffGrid, "%q written with TTL %v (effective %v) was gone %v after the write began; the declared model (Early %v, Granularity %v) keeps it for at least %v",
			x.key, x.ttl, x.eff, el.Round(time.Microsecond), e.traits.Expiry.Early, e.traits.Expiry.Granularity, x.lo)
	}
	return true
}

// offGridCoarse writes a TTL half a second off the whole seconds (2.5 s by
// default) at a random sub-second phase, and again half a second later, so
// a store that truncates or rounds TTLs or expiry instants to a unit coarser
// than its declared Granularity is caught from both sides: whatever the
// phase, one of the two writes lands at least half a second from the grid.
func (e *env) offGridCoarse(ctx context.Context) {
	off := e.opts.ExpiryTTL + 500*time.Millisecond
	phase := time.Duration(rand.Int64N(1000)) * time.Millisecond
	if _, ok := e.h.(TimeAdvancer); ok {
		// The backend's clock is the harness's: move it to the phase,
		// then half a second further for the second write.
		first := e.advanced
		e.measure(ctx, expiring{key: "off-grid-a.example", ttl: off, early: promiseOffGrid, late: promiseOffGrid, advanceFirst: phase + time.Millisecond})
		since := (e.advanced - first - phase) % time.Second
		next := (1500*time.Millisecond - since) % time.Second
		e.measure(ctx, expiring{key: "off-grid-b.example", ttl: off, early: promiseOffGrid, late: promiseOffGrid, advanceFirst: next + time.Millisecond})
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
			e.measure(ctx, expiring{key: key, ttl: off, early: promiseOffGrid, late: promiseOffGrid})
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
			e.lifetime(ctx, lr, key, t, start, pad, promiseSkewedReader, promiseSkewedReader, "written with TTL "+t.String())
		}
	}
	if !hasAdv || !hasSk {
		return
	}
	const key = "skewed-reader.example"
	long := e.opts.StateTTL
	reader, err := sk.MakeSkewedStore(ctx, e.raw, -pad)
	if err != nil || reader == nil {
		e.errorf(promiseSkewedReader, "SkewedStoreMaker.MakeSkewedStore(%v) = %v, %v", -pad, reader, err)
		return
	}
	start := time.Now()
	ver, ok := e.create(ctx, key, val("padded"), long)
	if !ok {
		return
	}
	took := time.Since(start)
	if _, _, _, ok := e.awaitRead(ctx, promiseRead, key, ver, val("padded")); !ok {
		return
	}
	eff, _, _ := e.windowFor(long)
	guard := 2*took + e.traits.Expiry.Granularity + time.Millisecond
	at := eff + pad - guard
	if err := e.advance(ctx, adv, at); err != nil {
		e.errorf(promiseSkewedReader, "TimeAdvancer.Advance(%v) = %v", at, err)
		return
	}
	_, got, err := reader.Get(ctx, key)
	el := time.Since(start)
	switch {
	case errors.Is(err, driver.ErrNotFound) && at+el-pad >= eff:
		e.undecidedf("%q: the reader %v behind found it gone after %v advanced and %v of real time, past its logical expiry: the probe came too late to tell", key, pad, at, el.Round(time.Millisecond))
	case errors.Is(err, driver.ErrNotFound):
		e.errorf(promiseSkewedReader, "%q written with TTL %v (effective %v): a reader whose clock is %v behind found it gone once the backend clock advanced %v (%v counting real time), while by its clock the record is live for %v more",
			key, long, eff, pad, at, (at + el).Round(time.Millisecond), (eff - (at + el - pad)).Round(time.Millisecond))
	case err != nil:
		e.errorf(promiseSkewedReader, "the skewed reader's Get(%q) = %v", key, err)
	case got != ver:
		e.errorf(promiseSkewedReader, "the skewed reader's Get(%q) returned version %d, want %d", key, got, ver)
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
