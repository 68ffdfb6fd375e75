package kvbreaker

import (
	"context"
	"errors"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/machine"
)

// Observer receives what a Breaker does, for metrics and traces: the module
// github.com/kvbreaker/kvbreaker/otelkvbreaker fills one for OpenTelemetry.
// Every field may be nil. Hooks run on the calling goroutine, inside the
// call they report, so they must be quick and must not call the Breaker.
//
// Each hook takes an Info struct, as net/http/httptrace's hooks take
// DNSDoneInfo and the like, so that a later version can add a field
// without breaking a hook (code that builds one, a test, should name its
// fields). ComposeObservers lets several
// Observers watch one Breaker (OpenTelemetry's and a program's own);
// Settings.OnStateChange and Settings.OnDrop are shortcuts for a
// Transition hook and a Decision hook that New composes with this one.
//
// New copies the Observer: setting a field afterwards does not reach a
// Breaker made before. A hook that is nil costs the Breaker one nil check.
type Observer struct {
	// Decision is called once per Allow with its decision, a Drop
	// included (Settings.OnDrop's shortcut).
	Decision func(ctx context.Context, e DecisionInfo)
	// Outcome is called once Success, ReachableFailure or Failure (or
	// Record with one of them) has stored its outcome or failed to.
	Outcome func(ctx context.Context, e OutcomeInfo)
	// Transition is called after this worker's write moved host's circuit
	// (Settings.OnStateChange's shortcut): once per transition across the
	// fleet, by the worker whose write made it.
	Transition func(ctx context.Context, e TransitionInfo)
	// Abandon is called when Breaker.Abandon gives up a probe whose
	// delivery said nothing about the host (Do and httpbreaker call it
	// when the caller cancelled the probe).
	Abandon func(ctx context.Context, e AbandonInfo)
	// StoreCall is called before each call the Breaker makes to its store.
	// The context it returns is the call's (it may carry a span; nil keeps
	// ctx). The function it returns, if not nil, is called once, when the
	// call has returned.
	StoreCall func(ctx context.Context, e StoreCallInfo) (context.Context, func(StoreCallDoneInfo))
	// ClockOffset is called with each new estimate of the store's clock
	// offset (see Breaker.ClockOffset).
	ClockOffset func(ctx context.Context, o ClockOffset)
	// RecordAnomaly is called each time the Breaker reads a record it
	// cannot use as written (AnomalyInfo says which); the Logger hears of it
	// once per host per 10 minutes.
	RecordAnomaly func(ctx context.Context, e AnomalyInfo)
	// Mirror is called when the mirror (Settings.Mirror) starts or stops
	// deciding, with why. It runs on the mirror's goroutine, or for
	// "stale" on the call that found the feed stale.
	Mirror func(ctx context.Context, e MirrorInfo)
	// MirrorLag is called when one of this worker's writes arrives through
	// the mirror's feed, with the time since it was sent: the propagation
	// delay, measured on one clock. It runs on the mirror's goroutine.
	MirrorLag func(ctx context.Context, e MirrorLagInfo)
}

// MirrorInfo is what Observer.Mirror reports: the mirror became healthy
// (it decides) or unhealthy (every call reads the store).
type MirrorInfo struct {
	Healthy bool
	// Reason says why: "synced", the feed delivered a snapshot and is
	// current, the mirror decides; "lost", the feed may have missed a
	// change (a dropped connection, a compacted history, an overflowing
	// buffer) and resynchronises; "stale", no heartbeat within
	// MirrorStaleness, noticed by the first call that found it;
	// "over_cap", the store holds more than MirrorSize records; "ended",
	// the feed ended with an error (the store refused, or was closed),
	// and is followed again after a pause.
	Reason string
	// Err is the feed's error, for "lost" and "ended".
	Err error
}

// MirrorLagInfo is what Observer.MirrorLag reports.
type MirrorLagInfo struct {
	// Lag is the time from sending a write to the store until the feed
	// delivered it and the write had returned (whichever came later).
	Lag time.Duration
}

// DecisionInfo is what Observer.Decision reports: one Allow's answer.
type DecisionInfo struct {
	Host     string
	Decision Decision
	// RetryAt and HeldSince are the Verdict's: when a held message should
	// ask again (Hold), and when it was first held (Hold; for a Drop, the
	// heldSince Allow was given, which Settings.OnDrop receives).
	RetryAt   time.Time
	HeldSince time.Time
	// Cached reports that Allow answered without a store read: from the
	// local cache (Settings.CacheSize) or from the mirror.
	Cached bool
	// Mirrored reports that the mirror (Settings.Mirror) answered.
	Mirrored bool
	// Err is the error Allow returned with the decision: a store failure
	// it answered in spite of (see Settings.FailClosed), an invalid host.
	Err error
}

// OutcomeInfo is what Observer.Outcome reports: the outcome of a delivery
// as the caller recorded it.
type OutcomeInfo struct {
	Host string
	// Outcome is Success, ReachableFailure or Failure.
	Outcome Outcome
	// Err is the error the recording method returned: nil once the store
	// holds the outcome.
	Err error
}

// TransitionInfo is what Observer.Transition reports: a circuit moved by
// this worker's write.
type TransitionInfo struct {
	Host     string
	From, To State
}

// AbandonInfo is what Observer.Abandon reports: a probe its caller gave up
// (cancelled, shut down) before it said anything about the host.
type AbandonInfo struct {
	Host string
	// Released reports that the store still held this probe's claim and
	// Abandon gave it back, so the next Allow may probe at once instead of
	// holding for RecoveryDelay. False: the probe had been answered or
	// taken over meanwhile, or the store failed.
	Released bool
}

// StoreCallInfo is what Observer.StoreCall reports before a store call.
type StoreCallInfo struct {
	// Op names the call, in OpenTelemetry's attribute style: "get",
	// "compare_and_swap", "compare_and_delete", or "sample_clock" (a read
	// of the store's clock, driver.ClockSampler).
	Op string
	// Host is the delivery host whose record is read or written; empty
	// for "sample_clock".
	Host string
}

// StoreCallDoneInfo is what the function Observer.StoreCall returned
// receives once the store call has returned.
type StoreCallDoneInfo struct {
	// Outcome classifies how the call ended (not a delivery: that is an
	// Outcome): "ok"; "not_found", the key was absent
	// (driver.ErrNotFound); "conflict", a compare-and-swap or
	// compare-and-delete found another version (driver.ErrConflict);
	// "timeout", the call's deadline (Settings.CallTimeout or the
	// caller's) passed; "canceled", the caller's context was canceled;
	// "error", any other failure (the store is down, refused, corrupt).
	Outcome string
	// Err is the store's error; nil exactly when Outcome is "ok".
	Err error
}

// AnomalyInfo is what Observer.RecordAnomaly reports: a record of Host the
// Breaker could not use as written, which it never lets stall a circuit.
type AnomalyInfo struct {
	Host string
	// Anomaly names what is wrong with the record:
	//   - "undecodable": the stored value is no record this build can
	//     decode (another program's data, a half-written or newer-format
	//     record). It counts as absent, and the next write replaces it.
	//   - "future": the record holds an instant no worker within
	//     Settings.ClockSkew of true time could have written yet (a
	//     failure after now + 2×ClockSkew, or a restraint ending after
	//     now + RecoveryDelay + 2×ClockSkew): its writer's clock is fast.
	//     Allow holds the host no longer than a correct writer could have
	//     made it, and rewrites the record on this worker's clock.
	Anomaly string
}

// The store calls a Breaker makes (StoreCallInfo.Op).
const (
	opGet              = "get"
	opCompareAndSwap   = "compare_and_swap"
	opCompareAndDelete = "compare_and_delete"
	opSampleClock      = "sample_clock"
)

// The outcomes of a store call (StoreCallDoneInfo.Outcome).
const (
	storeOK       = "ok"
	storeNotFound = "not_found"
	storeConflict = "conflict"
	storeTimeout  = "timeout"
	storeCanceled = "canceled"
	storeError    = "error"
)

// ClockOffset is an estimate of how far the store's clock is ahead of this
// worker's (Settings.Clock); negative when it is behind. The true offset
// lies within Offset ± Uncertainty.
type ClockOffset struct {
	Offset      time.Duration
	Uncertainty time.Duration
	// At is when the estimate was last updated, by the worker's clock.
	At time.Time
}

// storeOutcomeOf classifies a store call's error.
func storeOutcomeOf(err error) string {
	switch {
	case err == nil:
		return storeOK
	case errors.Is(err, driver.ErrNotFound):
		return storeNotFound
	case errors.Is(err, driver.ErrConflict):
		return storeConflict
	case errors.Is(err, context.DeadlineExceeded):
		return storeTimeout
	case errors.Is(err, context.Canceled):
		return storeCanceled
	}
	return storeError
}

// ComposeObservers returns an Observer that reports each event to every
// observer given that has a hook for it, in the order given (nil observers
// are skipped), as net/http/httptrace composes a ClientTrace with the one
// already in a context. Its StoreCall passes each observer's StoreCall the
// context the one before returned, and, once the store call has returned,
// calls every done function they returned, the last observer's first, so
// that nested spans end innermost first. The observers given are not
// changed; changing them afterwards does not change the result.
func ComposeObservers(observers ...*Observer) *Observer {
	var (
		decision   []func(context.Context, DecisionInfo)
		outcome    []func(context.Context, OutcomeInfo)
		transition []func(context.Context, TransitionInfo)
		abandon    []func(context.Context, AbandonInfo)
		storeCall  []func(context.Context, StoreCallInfo) (context.Context, func(StoreCallDoneInfo))
		offset     []func(context.Context, ClockOffset)
		anomaly    []func(context.Context, AnomalyInfo)
		mirror     []func(context.Context, MirrorInfo)
		mirrorLag  []func(context.Context, MirrorLagInfo)
	)
	for _, o := range observers {
		if o == nil {
			continue
		}
		if o.Decision != nil {
			decision = append(decision, o.Decision)
		}
		if o.Outcome != nil {
			outcome = append(outcome, o.Outcome)
		}
		if o.Transition != nil {
			transition = append(transition, o.Transition)
		}
		if o.Abandon != nil {
			abandon = append(abandon, o.Abandon)
		}
		if o.StoreCall != nil {
			storeCall = append(storeCall, o.StoreCall)
		}
		if o.ClockOffset != nil {
			offset = append(offset, o.ClockOffset)
		}
		if o.RecordAnomaly != nil {
			anomaly = append(anomaly, o.RecordAnomaly)
		}
		if o.Mirror != nil {
			mirror = append(mirror, o.Mirror)
		}
		if o.MirrorLag != nil {
			mirrorLag = append(mirrorLag, o.MirrorLag)
		}
	}
	return &Observer{
		Decision:      fanOut(decision),
		Outcome:       fanOut(outcome),
		Transition:    fanOut(transition),
		Abandon:       fanOut(abandon),
		StoreCall:     chainStoreCalls(storeCall),
		ClockOffset:   fanOut(offset),
		RecordAnomaly: fanOut(anomaly),
		Mirror:        fanOut(mirror),
		MirrorLag:     fanOut(mirrorLag),
	}
}

// fanOut is one hook calling each of hooks in order; nil for none, and the
// hook itself for one, which then costs nothing extra.
func fanOut[E any](hooks []func(context.Context, E)) func(context.Context, E) {
	switch len(hooks) {
	case 0:
		return nil
	case 1:
		return hooks[0]
	}
	return func(ctx context.Context, e E) {
		for _, h := range hooks {
			h(ctx, e)
		}
	}
}

// chainStoreCalls is one StoreCall hook running each of hooks in order,
// each on the context the one before returned.
func chainStoreCalls(hooks []func(context.Context, StoreCallInfo) (context.Context, func(StoreCallDoneInfo))) func(context.Context, StoreCallInfo) (context.Context, func(StoreCallDoneInfo)) {
	switch len(hooks) {
	case 0:
		return nil
	case 1:
		return hooks[0]
	}
	return func(ctx context.Context, e StoreCallInfo) (context.Context, func(StoreCallDoneInfo)) {
		// One done function is handed on as it is: only a call that two
		// observers both time allocates a function that calls both.
		var first func(StoreCallDoneInfo)
		var more []func(StoreCallDoneInfo)
		for _, h := range hooks {
			c, done := h(ctx, e)
			if c != nil {
				ctx = c
			}
			switch {
			case done == nil:
			case first == nil:
				first = done
			default:
				more = append(more, done)
			}
		}
		if more == nil {
			return ctx, first
		}
		return ctx, func(d StoreCallDoneInfo) {
			for i := len(more) - 1; i >= 0; i-- {
				more[i](d)
			}
			first(d)
		}
	}
}

// observerFor is the Observer a Breaker with settings s reports to: s's
// Observer composed with the OnStateChange and OnDrop shortcuts, which run
// first. Every event then has one path, through b.obs.
func observerFor(s *Settings) Observer {
	var short *Observer
	if s.OnStateChange != nil || s.OnDrop != nil {
		short = &Observer{}
		if f := s.OnStateChange; f != nil {
			short.Transition = func(_ context.Context, e TransitionInfo) { f(e.Host, e.From, e.To) }
		}
		if f := s.OnDrop; f != nil {
			short.Decision = func(_ context.Context, e DecisionInfo) {
				if e.Decision == Drop {
					f(e.Host, e.HeldSince)
				}
			}
		}
	}
	switch {
	case short == nil && s.Observer == nil:
		return Observer{}
	case short == nil:
		return *s.Observer
	}
	return *ComposeObservers(short, s.Observer)
}

// The methods below report one event each: a nil check, and out of line
// (go:noinline keeps the check within the inlining budget) the Info and
// the hook's call, paid only by a Breaker that has the hook.

// storeCall starts observing one store call; end finishes it.
func (b *Breaker) storeCall(ctx context.Context, op string, host string) (context.Context, func(StoreCallDoneInfo)) {
	if b.obs.StoreCall == nil {
		return ctx, nil
	}
	return b.startStoreCall(ctx, op, host)
}

func (b *Breaker) startStoreCall(ctx context.Context, op string, host string) (context.Context, func(StoreCallDoneInfo)) {
	c, done := b.obs.StoreCall(ctx, StoreCallInfo{Op: op, Host: host})
	if c == nil {
		c = ctx
	}
	return c, done
}

func end(done func(StoreCallDoneInfo), err error) {
	if done != nil {
		endStoreCall(done, err)
	}
}

func endStoreCall(done func(StoreCallDoneInfo), err error) {
	done(StoreCallDoneInfo{Outcome: storeOutcomeOf(err), Err: err})
}

// decided reports Allow's verdict v (and the error returned with it).
func (b *Breaker) decided(ctx context.Context, host string, v *Verdict, by decider, err error) {
	if b.obs.Decision != nil {
		b.reportDecision(ctx, host, v, by, err)
	}
}

//go:noinline
func (b *Breaker) reportDecision(ctx context.Context, host string, v *Verdict, by decider, err error) {
	b.obs.Decision(ctx, DecisionInfo{Host: host, Decision: v.Decision, RetryAt: v.RetryAt, HeldSince: v.HeldSince,
		Cached: by != byStore, Mirrored: by == byMirror, Err: err})
}

// recorded reports outcome o of a delivery to host, stored unless err.
func (b *Breaker) recorded(ctx context.Context, host string, o Outcome, err error) {
	if b.obs.Outcome != nil {
		b.obs.Outcome(ctx, OutcomeInfo{Host: host, Outcome: o, Err: err})
	}
}

// notify reports the transition st made, if it made one.
func (b *Breaker) notify(ctx context.Context, host string, st *machine.Step) {
	if b.obs.Transition != nil && st.Changed() {
		b.reportTransition(ctx, host, st)
	}
}

//go:noinline
func (b *Breaker) reportTransition(ctx context.Context, host string, st *machine.Step) {
	b.obs.Transition(ctx, TransitionInfo{Host: host, From: State(st.From), To: State(st.To)})
}

// abandoned reports a delivery to host its caller gave up; released: its
// probe claim was given back.
func (b *Breaker) abandoned(ctx context.Context, host string, released bool) {
	if b.obs.Abandon != nil {
		b.obs.Abandon(ctx, AbandonInfo{Host: host, Released: released})
	}
}
