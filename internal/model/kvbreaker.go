package model

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

// Kvbreaker is kvbreaker's kvbreaker.Breaker over a memory store, both on the
// simulated clock, labelled "kvbreaker". With WithProcesses it is a fleet
// of processes, one Breaker each, sharing the store; UseProcess picks the
// one the next call runs in. With WithDecisionCache every process has a
// decision cache (Settings.CacheSize), labelled "kvbreaker+cache"; with
// WithMirror every process decides from a mirror of the store, labelled
// "kvbreaker+mirror".
type Kvbreaker struct {
	procs []*kvProcess
	cur   *kvProcess
	mem   *memory.Store
	store driver.Store // what Record and judgeStale read: mem, or mem capped (Live asks mem)
	name  string
	last  Transition
	err   error
	// replay is a Breaker built from the same Settings without the
	// decision cache, over snap: it answers what the shared store's current
	// record would have decided (judgeStale), through kvbreaker's own
	// Settings conversion and decision path rather than a copy of them.
	replay *kvbreaker.Breaker
	snap   *snapshot

	// Staleness effects of the decision cache or the mirror (Staleness).
	stale Staleness
	// feed carries commits to the processes' mirrors (WithMirror).
	feed *feed
}

// Staleness counts what the decision cache or the mirror changed: Allow
// answers decided on a cached or mirrored record that differs from the
// store's, where the store's record would have decided otherwise.
type Staleness struct {
	// Decisions is the number of such answers.
	Decisions int
	// MaxAge is, for the cache, the oldest cached record among them: how
	// long before the answer the process read or wrote it, below
	// CacheStaleness. For the mirror it is the longest lag among them: how
	// long before the answer the oldest change the mirror had not yet
	// received was committed (or the store expired the record), below the
	// propagation delay.
	MaxAge time.Duration
	// Served is every Allow answered from the cache or the mirror (no
	// store read).
	Served int
	// Retries (mirror only) are Allow answers that hold, as the store's
	// record would have, but until another instant: a hold decided on a
	// half-open record the store had already reopened re-checks after
	// ReleaseInterval instead of waiting for the new restraint's end.
	Retries int
	// Outcomes (mirror only) are the Failures and Successes that wrote
	// nothing, decided on a mirrored record that differs from the store's,
	// where the store's record would have been written: a Success that
	// leaves a record another process wrote within the delay, a Failure
	// ignored as the mirror's open circuit's after another process closed
	// it. A write decided on a stale mirror is never wrong: its
	// compare-and-swap fails and the Breaker retries on the store's record.
	Outcomes int
}

// cappedStore is a memory store that expires every record at most maxTTL
// after its write while declaring memory's exact expiry (WithMaxStoreTTL):
// a store that breaks its declared Traits, which a Breaker cannot see.
type cappedStore struct {
	*memory.Store
	maxTTL time.Duration
}

func (s cappedStore) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	return s.Store.CompareAndSwap(ctx, key, old, value, min(ttl, s.maxTTL))
}

// NewKvbreaker builds a Breaker from s over a fresh memory store, both
// reading clock (one Breaker per process with WithProcesses). The simulator
// must set clock to the instant it passes to every call. s.Clock,
// s.OnStateChange and s.CacheSize are replaced (WithDecisionCache sets the
// cache). The error is kvbreaker.New's when s is refused (for example a
// StateTTL below max(RecoveryDelay, FailureWindow) plus the store's margin).
func NewKvbreaker(s kvbreaker.Settings, clock func() time.Time, opts ...Option) (*Kvbreaker, error) {
	so := applyOptions(opts)
	mem := memory.New(memory.WithClock(clock))
	k := &Kvbreaker{mem: mem, store: mem, name: "kvbreaker" + so.suffix()}
	if so.maxTTL > 0 {
		k.store = cappedStore{Store: mem, maxTTL: so.maxTTL}
	}
	if so.cacheSize > 0 {
		k.name = "kvbreaker+cache" + so.suffix()
	}
	n := max(so.procs, 1)
	if so.mirror {
		k.name = "kvbreaker+mirror" + so.suffix()
		k.feed = newFeed(so.delay, n)
		// The mirror's procStore declares the store not atomic (see
		// mirror.go); the Breaker's warning about that is not for here.
		s.Logger = slog.New(slog.DiscardHandler)
	}
	s.Clock = clock
	s.OnStateChange = func(_ string, from, to kvbreaker.State) { k.last = Transition{From: from, To: to} }
	// The decision cache is this package's procStore (see there): core's
	// judges staleness by the real monotonic clock, which simulated time
	// does not move. Write hints stay core's own.
	s.CacheSize, s.CacheStaleness = 0, 0
	for i := range n {
		p := &kvProcess{ps: &procStore{Store: k.store, clock: clock, max: so.cacheSize, stale: so.cacheStale,
			rng: rand.New(rand.NewPCG(uint64(i), 0x6b7663616368))}}
		if k.feed != nil {
			p.ps.mir, p.ps.maxTTL = k.feed.newMirror(i), so.maxTTL
			p.ps.mir.skipOwn = so.skipOwn
		}
		b, err := kvbreaker.New(p.ps, s)
		if err != nil {
			return nil, err
		}
		p.b = b
		k.procs = append(k.procs, p)
	}
	k.cur = k.procs[0]
	// The replay reports to nobody: its answers are hypothetical.
	s.OnStateChange, s.OnDrop, s.Observer = nil, nil, nil
	// The replay reads before it writes, as the processes do (Traits).
	k.snap = &snapshot{traits: k.procs[0].ps.Traits()}
	r, err := kvbreaker.New(k.snap, s)
	if err != nil {
		return nil, err
	}
	k.replay = r
	return k, nil
}

// snapshot is a store that shows one record, whatever key is asked: the
// shared store's current record for the host being judged. Writes succeed
// and change nothing, so a replayed Allow leaves no trace.
type snapshot struct {
	val    []byte
	ver    driver.Version
	err    error
	traits driver.Traits
	// wrote: a replayed call wrote (the mirror's outcomes).
	wrote bool
}

func (s *snapshot) Get(context.Context, string) ([]byte, driver.Version, error) {
	return s.val, s.ver, s.err
}

func (s *snapshot) CompareAndSwap(context.Context, string, driver.Version, []byte, time.Duration) (driver.Version, error) {
	s.wrote = true
	return s.ver + 1, nil
}

func (s *snapshot) CompareAndDelete(context.Context, string, driver.Version) error {
	s.wrote = true
	return nil
}

func (s *snapshot) Traits() driver.Traits { return s.traits }

// kvProcess is one process of the fleet: its Breaker and what it sends to
// the shared store.
type kvProcess struct {
	b  *kvbreaker.Breaker
	ps *procStore
}

// Processes returns the number of processes.
func (k *Kvbreaker) Processes() int { return len(k.procs) }

// UseProcess makes the next calls run in process p (modulo Processes).
func (k *Kvbreaker) UseProcess(p int) { k.cur = k.procs[p%len(k.procs)] }

// Name returns "kvbreaker", "kvbreaker+cache" or "kvbreaker+mirror", with
// "@ttl" and the cap over a capped store.
func (k *Kvbreaker) Name() string { return k.name }

// Breaker returns the Breaker of the current process.
func (k *Kvbreaker) Breaker() *kvbreaker.Breaker { return k.cur.b }

// Cost implements Coster: every process's requests to the shared store.
// With the mirror, FeedReads (in Reads) are the reads a feed of
// invalidations makes: a process reads a key the feed said changed when
// next asked about it.
func (k *Kvbreaker) Cost() Cost {
	var c Cost
	for _, p := range k.procs {
		c = c.Add(p.ps.cost)
	}
	if f := k.feed; f != nil {
		for _, p := range k.procs {
			c.Reads += p.ps.mir.onUse
			c.FeedReads += p.ps.mir.onUse
			c.FeedReadsOwn += p.ps.mir.onUseOwn
		}
	}
	return c
}

// Writes returns every commit of the processes, in commit order (nil
// without WithMirror).
func (k *Kvbreaker) Writes() []Write {
	if k.feed == nil {
		return nil
	}
	return k.feed.writes
}

// Staleness returns what the decision cache or the mirror changed (zero
// without either).
func (k *Kvbreaker) Staleness() Staleness { return k.stale }

// Err returns the first error a Breaker call returned, if any; with the
// memory store there should be none.
func (k *Kvbreaker) Err() error { return k.err }

func (k *Kvbreaker) keep(err error) {
	if err != nil && k.err == nil {
		k.err = err
	}
}

func (k *Kvbreaker) take() Transition {
	t := k.last
	k.last = Transition{}
	return t
}

// Allow implements Model; now is the clock's reading.
func (k *Kvbreaker) Allow(host string, now, heldSince time.Time) (Verdict, Transition) {
	ps := k.cur.ps
	if ps.mir != nil {
		stale := k.mirrorStale(host, now)
		v, err := k.cur.b.Allow(context.Background(), host, heldSince)
		k.keep(err)
		if ps.read {
			k.stale.Served++
		}
		if stale {
			r, err := k.replay.Allow(context.Background(), host, heldSince)
			k.keep(err)
			switch {
			case r.Decision != v.Decision:
				k.stale.Decisions++
			case !r.RetryAt.Equal(v.RetryAt):
				k.stale.Retries++
			default:
				return Verdict{Decision: v.Decision, RetryAt: v.RetryAt}, k.take()
			}
			k.stale.MaxAge = max(k.stale.MaxAge, ps.mir.lag(host, now))
		}
		return Verdict{Decision: v.Decision, RetryAt: v.RetryAt}, k.take()
	}
	ps.allow, ps.served = true, nil
	v, err := k.cur.b.Allow(context.Background(), host, heldSince)
	ps.allow = false
	k.keep(err)
	if e := ps.served; e != nil {
		k.stale.Served++
		k.judgeStale(host, now, heldSince, e, v.Decision)
	}
	return Verdict{Decision: v.Decision, RetryAt: v.RetryAt}, k.take()
}

// judgeStale counts an answer decided on cached entry e that the store's
// current record would have decided otherwise.
func (k *Kvbreaker) judgeStale(host string, now, heldSince time.Time, e *cacheEntry, got kvbreaker.Decision) {
	val, ver, err := k.store.Get(context.Background(), host)
	if err != nil {
		ver = driver.NoVersion
	}
	if (err == nil) == e.present && ver == e.ver {
		return // the cache was up to date
	}
	k.snap.val, k.snap.ver, k.snap.err = val, ver, err
	v, err := k.replay.Allow(context.Background(), host, heldSince)
	k.keep(err)
	if v.Decision != got {
		k.stale.Decisions++
		k.stale.MaxAge = max(k.stale.MaxAge, now.Sub(e.at))
	}
}

// mirrorStale reports whether the current process's mirror holds another
// record for host at now than the store does, and if so loads the store's
// into the replay's snapshot. It is called before the call, which may
// write; it also arms the process's store to note the call's read and
// write. The store's record is the feed's last commit of host, unless
// expired: every write to the store is a process's, and in the feed.
func (k *Kvbreaker) mirrorStale(host string, now time.Time) bool {
	ps := k.cur.ps
	ps.read, ps.wrote = false, false
	e := ps.mir.get(host, now, false)
	c := k.feed.last[host]
	live := c.present && now.Before(c.expires)
	if live == e.present && (!live || c.ver == e.ver) {
		return false
	}
	k.snap.val, k.snap.ver, k.snap.err, k.snap.wrote = nil, driver.NoVersion, driver.ErrNotFound, false
	if live {
		k.snap.val, k.snap.ver, k.snap.err = c.value, c.ver, nil
	}
	return true
}

// outcome reports a delivery's outcome through the current process; with
// the mirror it counts an outcome the mirror's staleness changed (see
// Staleness.Outcomes).
func (k *Kvbreaker) outcome(host string, now time.Time, call func(*kvbreaker.Breaker, context.Context, string) error) Transition {
	ps := k.cur.ps
	stale := ps.mir != nil && k.mirrorStale(host, now)
	k.keep(call(k.cur.b, context.Background(), host))
	if stale && !ps.wrote {
		k.keep(call(k.replay, context.Background(), host))
		if k.snap.wrote {
			k.stale.Outcomes++
			k.stale.MaxAge = max(k.stale.MaxAge, ps.mir.lag(host, now))
		}
	}
	return k.take()
}

// Failure implements Model.
func (k *Kvbreaker) Failure(host string, now time.Time) Transition {
	return k.outcome(host, now, (*kvbreaker.Breaker).Failure)
}

// Success implements Model.
func (k *Kvbreaker) Success(host string, now time.Time) Transition {
	return k.outcome(host, now, (*kvbreaker.Breaker).Success)
}

// Live implements Model: the store still holds an unexpired record. Not a
// request of the fleet's: not counted.
func (k *Kvbreaker) Live(host string, _ time.Time) bool {
	// Expiry, not Get: the same answer (ErrNotFound for an absent or
	// expired key) without a copy of the value, which the simulator asks
	// before most calls on a restrained host and would throw away.
	_, err := k.mem.Expiry(context.Background(), host)
	if err != nil && !errors.Is(err, driver.ErrNotFound) {
		k.keep(err)
	}
	return err == nil
}

// Restraint implements Model: the record's RestrainedUntil.
func (k *Kvbreaker) Restraint(host string, _ time.Time) (time.Time, bool) {
	rec, ok := k.Record(host)
	return rec.RestrainedUntil, ok && !rec.RestrainedUntil.IsZero()
}

// Record returns host's stored record, if any (not counted as a request).
func (k *Kvbreaker) Record(host string) (record.Record, bool) {
	v, _, err := k.store.Get(context.Background(), host)
	if err != nil {
		if !errors.Is(err, driver.ErrNotFound) {
			k.keep(err)
		}
		return record.Record{}, false
	}
	rec, err := record.DecodeRecord(v)
	if err != nil {
		k.keep(fmt.Errorf("model: host %q: %w", host, err))
	}
	return rec, err == nil
}
