package kvbreaker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/machine"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

// maxCASAttempts bounds the compare-and-swap retries of one call. Contention
// ends quickly: once a host's circuit is open, failures stop writing and
// allows stop writing after one probe wins, so losing this many times in a
// row means the store or fleet misbehaves; Allow then holds for
// ReleaseInterval rather than spin.
const maxCASAttempts = 16

// errContended is returned when a write lost maxCASAttempts compare-and-swaps
// in a row.
var errContended = errors.New("kvbreaker: too many concurrent writers")

// Verdict is Breaker.Allow's answer.
type Verdict struct {
	Decision Decision
	// RetryAt is when a held message should ask again (Hold only).
	RetryAt time.Time
	// HeldSince is the instant to pass back to Allow when asking again:
	// the heldSince given, or now for a message held for the first time.
	HeldSince time.Time
	// claim is the RestrainedUntil this Probe's claim wrote: Abandon
	// releases the claim only while the stored record still carries it.
	claim time.Time
}

// Status is a host's stored state, as Breaker.Inspect reads it: a
// read-only view of its record.
type Status struct {
	Host  string
	Found bool
	State State
	// Failures are the failure instants that still count, oldest first.
	Failures []time.Time
	// RestrainedUntil: deliveries are held until this instant; zero when
	// the circuit is closed.
	RestrainedUntil time.Time
	// Probing: a half-open probe is in flight.
	Probing bool
	// Size is the encoded record's size in bytes.
	Size    int
	Version driver.Version
	// Err is set when the stored record could not be decoded (it counts as
	// absent).
	Err error
}

// Breaker is a per-host circuit breaker whose state lives in a Store shared
// by the fleet. It is safe for concurrent use; many Breakers (one per worker
// process) may share one store.
type Breaker struct {
	store   driver.Store
	cfg     machine.Config
	traits  driver.Traits
	s       Settings
	clock   func() time.Time
	log     *slog.Logger
	timeout time.Duration
	cache   *cache
	// mirror decides while its feed is healthy (Settings.Mirror); nil
	// without one.
	mirror *mirror
	obs    Observer // Settings.Observer with the shortcuts composed in
	clk    clockCheck
	// anomalies rate-limits warnings of records the Breaker cannot use.
	anomalies anomalyLog
}

// New validates s against the store's traits and returns a Breaker. The
// error lists every invalid setting and what to change.
func New(store driver.Store, s Settings) (*Breaker, error) {
	if store == nil {
		return nil, errors.New("kvbreaker: New needs a store")
	}
	t := store.Traits()
	cfg, err := s.config(store, t)
	if err != nil {
		return nil, err
	}
	b := &Breaker{store: store, cfg: cfg, traits: t, s: s, clock: s.Clock, log: s.Logger, timeout: s.CallTimeout, obs: observerFor(&s)}
	if b.clock == nil {
		b.clock = time.Now
	}
	if b.log == nil {
		b.log = slog.Default()
	}
	if b.timeout == 0 {
		b.timeout = defaultCallTimeout
	}
	if t.InProcess {
		b.timeout = 0
	}
	stale := s.CacheStaleness
	if stale == 0 {
		stale = defaultCacheStaleness
	}
	if s.Mirror {
		// The mirror decides instead: the cache keeps only write hints
		// for when the mirror cannot decide.
		b.cache = newCache(0, 0)
		b.mirror = newMirror(b, store.(driver.Follower), s.MirrorSize, s.MirrorStaleness)
	} else {
		b.cache = newCache(s.CacheSize, stale)
	}
	b.initClock(store, &s)
	if b.mirror != nil {
		b.mirror.start()
	}
	if !t.Atomic {
		b.log.Warn("kvbreaker: store has no atomic compare-and-swap; running last-writer-wins, so concurrent workers may each see a transition",
			"store", fmt.Sprintf("%T", store))
	}
	return b, nil
}

// StateTTL is the TTL every record is written with:
// max(RecoveryDelay, FailureWindow) + TTLMargin unless set explicitly.
func (b *Breaker) StateTTL() time.Duration { return b.cfg.StateTTL }

// instant is one call's reading of time: wall is the Breaker's clock to the
// millisecond the record keeps (so what a worker decides equals what it
// stores), mono the monotonic clock the cache judges staleness by (a
// wall-clock step must not extend a cached entry).
type instant struct{ wall, mono time.Time }

// instant reads the clock once per call; time.Now a second time only when
// the decision cache, the mirror or the background clock check needs the
// monotonic clock and Settings.Clock replaced it.
func (b *Breaker) instant() instant {
	t := b.clock()
	in := instant{wall: wall(t), mono: t}
	if b.s.Clock != nil && (b.cache.decides() || b.mirror != nil || b.clk.auto) {
		in.mono = time.Now()
	}
	return in
}

// wall is t as a record keeps it: wall clock, to the millisecond. A
// millisecond divides a second, so truncating is taking off the
// nanoseconds past the millisecond, as Truncate(time.Millisecond) does
// after a general division that Allow's profile shows.
func wall(t time.Time) time.Time {
	t = t.Round(0)
	return t.Add(-time.Duration(t.Nanosecond() % int(time.Millisecond)))
}

// current is a record as read, with the version to compare against.
type current struct {
	rec record.Record
	ver driver.Version
}

// callContext bounds one store call by CallTimeout.
func (b *Breaker) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if b.timeout == 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, b.timeout)
}

func (b *Breaker) get(ctx context.Context, host string) (current, error) {
	ctx, cancel := b.callContext(ctx)
	defer cancel()
	ctx, done := b.storeCall(ctx, opGet, host)
	v, ver, err := b.store.Get(ctx, host)
	end(done, err)
	if errors.Is(err, driver.ErrNotFound) {
		return current{}, nil
	}
	if err != nil {
		return current{}, err
	}
	return current{rec: b.decode(ctx, host, v), ver: ver}, nil
}

// decode treats an undecodable record as absent; its version is kept so the
// next write replaces it.
func (b *Breaker) decode(ctx context.Context, host string, v []byte) record.Record {
	r, err := record.DecodeRecord(v)
	if err != nil {
		b.anomaly(ctx, host, anomalyUndecodable, "err", err)
	}
	return r
}

// apply performs step's write and returns what the store now holds. On a
// conflict it returns the key's current contents when the store sent them
// (ok == true), saving a Get.
func (b *Breaker) apply(ctx context.Context, host string, cur current, st *machine.Step) (next current, ok bool, err error) {
	ctx, cancel := b.callContext(ctx)
	defer cancel()
	switch st.Write {
	case machine.WritePut:
		var ver driver.Version
		ctx, done := b.storeCall(ctx, opCompareAndSwap, host)
		ver, err = b.store.CompareAndSwap(ctx, host, cur.ver, record.EncodeRecord(st.Record), b.cfg.StateTTL)
		end(done, err)
		if err == nil {
			return current{rec: st.Record, ver: ver}, true, nil
		}
	case machine.WriteDelete:
		ctx, done := b.storeCall(ctx, opCompareAndDelete, host)
		err = b.store.CompareAndDelete(ctx, host, cur.ver)
		end(done, err)
		if err == nil || errors.Is(err, driver.ErrNotFound) {
			// ErrNotFound: someone else closed it; nothing of ours to report.
			return current{}, true, err
		}
	}
	if ce, isCE := errors.AsType[*driver.ConflictError](err); isCE {
		if ce.Version == driver.NoVersion {
			return current{}, true, err
		}
		return current{rec: b.decode(ctx, host, ce.Value), ver: ce.Version}, true, err
	}
	return current{}, false, err
}

// Allow decides whether to deliver to host now. heldSince is when the
// message was first held (zero for a fresh one; Verdict.HeldSince tells what
// to pass next time). A message held for HoldLimit is dropped without a store
// read.
//
// When the store fails, Allow still answers (Send, or Hold for
// ReleaseInterval with FailClosed) and returns the error alongside. After
// too many lost probe elections it holds for ReleaseInterval. A host that
// fails ValidateKey is never passed to the store: Allow answers Send with an
// error matching driver.ErrInvalidKey (the breaker cannot track such a host).
func (b *Breaker) Allow(ctx context.Context, host string, heldSince time.Time) (v Verdict, err error) {
	// v is the result itself: built in place, not copied out at return.
	in := b.instant()
	now := in.wall
	if b.cfg.HoldExpired(heldSince, now) {
		v = Verdict{Decision: Drop, HeldSince: heldSince}
		b.decided(ctx, host, &v, byStore, nil)
		return v, nil
	}
	// No write hints here: Allow writes only to elect a probe, and at a
	// restraint's end every worker holding a message for the host asks at
	// once; on a hint each loser would pay a failed compare-and-swap (a
	// Raft proposal, a DynamoDB write unit) where a read costs less.
	var st machine.Step
	by, err := b.run(ctx, host, in, false, func(r record.Record, now time.Time) machine.Step {
		return machine.AllowStep(r, now, heldSince, &b.cfg)
	}, &st)
	if heldSince.IsZero() {
		heldSince = now
	}
	switch {
	case err == nil:
		v = Verdict{Decision: Decision(st.Decision), RetryAt: st.RetryAt}
		switch v.Decision {
		case Hold:
			v.HeldSince = heldSince
		case Probe:
			v.claim = st.Record.RestrainedUntil
		}
	case errors.Is(err, driver.ErrInvalidKey):
		v = Verdict{Decision: Send}
	case errors.Is(err, errContended):
		// Another worker is probing; look again shortly.
		v, err = Verdict{Decision: Hold, RetryAt: b.holdBriefly(now, heldSince), HeldSince: heldSince}, nil
	default:
		err = fmt.Errorf("kvbreaker: allow %q: %w", host, err)
		v = Verdict{Decision: Send}
		if b.s.FailClosed {
			v = Verdict{Decision: Hold, RetryAt: b.holdBriefly(now, heldSince), HeldSince: heldSince}
		}
	}
	b.decided(ctx, host, &v, by, err)
	return v, err
}

func (b *Breaker) holdBriefly(now, heldSince time.Time) time.Time {
	if t := heldSince.Add(b.cfg.HoldLimit); t.Before(now.Add(b.cfg.ReleaseInterval)) {
		return t
	}
	return now.Add(b.cfg.ReleaseInterval)
}

// Failure records that a delivery to host failed (no answer, 5xx, timeout).
func (b *Breaker) Failure(ctx context.Context, host string) error {
	in := b.instant()
	var st machine.Step
	_, err := b.run(ctx, host, in, true, func(r record.Record, now time.Time) machine.Step { return machine.FailureStep(r, now, &b.cfg) }, &st)
	err = wrap("failure", host, err)
	b.recorded(ctx, host, Failure, err)
	return err
}

// success is the step of a Success or a ReachableFailure.
func (b *Breaker) success(r record.Record, now time.Time) machine.Step {
	return machine.SuccessStep(r, now, &b.cfg)
}

// Success records that host answered; its record is deleted and the circuit
// closes.
func (b *Breaker) Success(ctx context.Context, host string) error {
	var st machine.Step
	_, err := b.run(ctx, host, b.instant(), true, b.success, &st)
	err = wrap("success", host, err)
	b.recorded(ctx, host, Success, err)
	return err
}

// ReachableFailure records a failure that proves the host is up (it
// answered, e.g. with a 4xx): like Success, the circuit closes.
func (b *Breaker) ReachableFailure(ctx context.Context, host string) error {
	var st machine.Step
	_, err := b.run(ctx, host, b.instant(), true, b.success, &st)
	err = wrap("reachable failure", host, err)
	b.recorded(ctx, host, ReachableFailure, err)
	return err
}

// Reset deletes host's record whatever it holds, force-closing the circuit.
func (b *Breaker) Reset(ctx context.Context, host string) error {
	var st machine.Step
	_, err := b.run(ctx, host, b.instant(), true, func(r record.Record, _ time.Time) machine.Step {
		return machine.Step{From: r.State(), To: record.StateClosed, Write: machine.WriteDelete}
	}, &st)
	return wrap("reset", host, err)
}

// Inspect reads host's record without changing it.
func (b *Breaker) Inspect(ctx context.Context, host string) (Status, error) {
	s := Status{Host: host}
	if err := driver.ValidateKey(host); err != nil {
		return s, err
	}
	ctx, cancel := b.callContext(ctx)
	defer cancel()
	ctx, done := b.storeCall(ctx, opGet, host)
	v, ver, err := b.store.Get(ctx, host)
	end(done, err)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		return s, nil
	case err != nil:
		return s, wrap("inspect", host, err)
	}
	s.Found, s.Size, s.Version = true, len(v), ver
	r, err := record.DecodeRecord(v)
	s.Failures, s.RestrainedUntil, s.Probing, s.Err = r.Failures, r.RestrainedUntil, r.Probing, err
	s.State = State(r.State())
	return s, nil
}

func wrap(op, host string, err error) error {
	if err == nil || errors.Is(err, driver.ErrInvalidKey) {
		return err
	}
	return fmt.Errorf("kvbreaker: %s %q: %w", op, host, err)
}

// Close flushes the store's queued writes, if it queues any (driver.Flusher,
// e.g. Workers KV), and then closes it, if it can be closed (io.Closer, e.g.
// etcd.Dial's store), so that a program that keeps only the Breaker loses
// no recorded failure at shutdown. ctx bounds the flush. It first cancels a
// background clock check that is running (Settings.ClockCheckInterval) and
// waits for it to end, and ends the mirror's feed (Settings.Mirror) and
// waits for its goroutine. Close the Breaker last of those sharing one store;
// the others need no Close (a clock check of theirs ends within
// CallTimeout). The Breaker must not be used after Close.
func (b *Breaker) Close(ctx context.Context) error {
	if b.mirror != nil {
		b.mirror.close()
	}
	b.closeClock()
	var err error
	if f, ok := b.store.(driver.Flusher); ok {
		if ferr := f.Flush(ctx); ferr != nil {
			err = fmt.Errorf("kvbreaker: close: %w", ferr)
		}
	}
	if c, ok := b.store.(io.Closer); ok {
		if cerr := c.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("kvbreaker: close: %w", cerr))
		}
	}
	return err
}
