package model

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/internal/machine"
)

// FedifyRecord is fedify's per-host KV value (CircuitBreakerKvState): the
// state is stored, not derived, next to the failure instants, the instant
// the circuit opened and the instant the current probe started. A zero
// Opened or HalfOpened means the field is absent.
type FedifyRecord struct {
	State      kvbreaker.State
	Failures   []time.Time
	Opened     time.Time
	HalfOpened time.Time
}

// FedifyOptions are fedify's CircuitBreakerOptions. A zero field means
// fedify's default; a negative duration is an error, as fedify's
// assertPositiveDuration makes it.
type FedifyOptions struct {
	// FailureThreshold failures within FailureWindow open the circuit.
	// Default 5, 10 minutes. Not used with Failure.
	FailureThreshold int
	FailureWindow    time.Duration
	// Failure is a custom failure policy over the failure history (at most
	// the newest 100 failures, not pruned by time).
	Failure func(failures []time.Time) bool
	// RecoveryDelay: an open circuit holds for this long, then lets one
	// probe through; a probe unanswered this long is stale. Default 30 min.
	RecoveryDelay time.Duration
	// HeldActivityTTL: a message held this long is dropped. Default 7 days.
	HeldActivityTTL time.Duration
	// ReleaseInterval: held messages re-check this often while a probe is
	// in flight. Default 1 s.
	ReleaseInterval time.Duration
	// StateTTL is the TTL of every record written. Zero derives it as
	// fedify does: max(RecoveryDelay+FailureWindow,
	// RecoveryDelay+HeldActivityTTL), or RecoveryDelay+HeldActivityTTL with
	// a custom Failure. An explicit value below RecoveryDelay is an error,
	// as in fedify 2.3.3 and later ("stateTtl must be at least
	// recoveryDelay."); to see what a store TTL below the restraint does,
	// cap the store instead (WithMaxStoreTTL).
	StateTTL time.Duration
}

// maxCustomFailureHistory is fedify's MAX_CUSTOM_FAILURE_HISTORY.
const maxCustomFailureHistory = 100

// FedifyConfig is the normalised form of FedifyOptions
// (normalizeCircuitBreakerOptions).
type FedifyConfig struct {
	FailureThreshold int
	FailureWindow    time.Duration
	Failure          func([]time.Time) bool
	RecoveryDelay    time.Duration
	HeldActivityTTL  time.Duration
	ReleaseInterval  time.Duration
	StateTTL         time.Duration
}

// NewFedifyConfig applies fedify's defaults and checks. Every problem is
// reported, joined in one error.
func NewFedifyConfig(o FedifyOptions) (FedifyConfig, error) {
	var errs []error
	dur := func(name string, v, def time.Duration) time.Duration {
		switch {
		case v < 0:
			errs = append(errs, fmt.Errorf("%s must be a positive duration (got %v)", name, v))
		case v == 0:
			return def
		}
		return v
	}
	c := FedifyConfig{
		RecoveryDelay:   dur("recoveryDelay", o.RecoveryDelay, 30*time.Minute),
		HeldActivityTTL: dur("heldActivityTtl", o.HeldActivityTTL, 7*24*time.Hour),
		ReleaseInterval: dur("releaseInterval", o.ReleaseInterval, time.Second),
		Failure:         o.Failure,
	}
	if o.StateTTL < 0 {
		errs = append(errs, fmt.Errorf("stateTtl must be a positive duration (got %v)", o.StateTTL))
	}
	if o.StateTTL > 0 && o.StateTTL < c.RecoveryDelay {
		errs = append(errs, errors.New("stateTtl must be at least recoveryDelay"))
	}
	if o.Failure == nil {
		switch {
		case o.FailureThreshold < 0:
			errs = append(errs, errors.New("failureThreshold must be a positive integer"))
		case o.FailureThreshold == 0:
			c.FailureThreshold = 5
		default:
			c.FailureThreshold = o.FailureThreshold
		}
		c.FailureWindow = dur("failureWindow", o.FailureWindow, 10*time.Minute)
		c.StateTTL = max(c.RecoveryDelay+c.FailureWindow, c.RecoveryDelay+c.HeldActivityTTL)
	} else {
		c.StateTTL = c.RecoveryDelay + c.HeldActivityTTL
	}
	if o.StateTTL > 0 {
		c.StateTTL = o.StateTTL
	}
	if len(errs) > 0 {
		return FedifyConfig{}, fmt.Errorf("fedify: invalid circuit breaker options: %w", errors.Join(errs...))
	}
	return c, nil
}

// prune is fedify's pruneFailures: the default policy keeps the failures
// no older than FailureWindow, then the newest FailureThreshold; a custom
// policy keeps the newest 100.
func (c *FedifyConfig) prune(ts []time.Time, now time.Time) []time.Time {
	if c.Failure != nil {
		if len(ts) > maxCustomFailureHistory {
			ts = ts[len(ts)-maxCustomFailureHistory:]
		}
		return slices.Clone(ts)
	}
	earliest := now.Add(-c.FailureWindow)
	out := make([]time.Time, 0, len(ts))
	for _, t := range ts {
		if !t.Before(earliest) {
			out = append(out, t)
		}
	}
	if len(out) > c.FailureThreshold {
		out = out[len(out)-c.FailureThreshold:]
	}
	return out
}

// failed is fedify's failure predicate.
func (c *FedifyConfig) failed(ts []time.Time) bool {
	if c.Failure != nil {
		return c.Failure(ts)
	}
	n := c.FailureThreshold
	return len(ts) >= n && ts[len(ts)-1].Sub(ts[len(ts)-n]) <= c.FailureWindow
}

// FedifyStep is the result of one fedify transition on a record.
type FedifyStep struct {
	Verdict Verdict
	// Write says what happens to the stored record; Record is the value
	// written by machine.WritePut.
	Write  machine.Write
	Record FedifyRecord
	// Transition is what fedify's onStateChange reports.
	Transition Transition
}

// FedifyBeforeSend is the decision part of fedify's beforeSend for a record
// read as (rec, found), without the store loop: drop after the held
// activity TTL; send when absent or closed; in half-open, hold until
// min(now+releaseInterval, halfOpened+recoveryDelay) and take over a stale
// probe after that; in open, hold until opened+recoveryDelay, then move to
// half-open and probe. Retry instants are capped at the drop instant.
func FedifyBeforeSend(rec FedifyRecord, found bool, now, heldSince time.Time, c *FedifyConfig) FedifyStep {
	switch {
	case holdExpired(now, heldSince, c.HeldActivityTTL):
		return FedifyStep{Verdict: Verdict{Decision: kvbreaker.Drop}}
	case !found || rec.State == kvbreaker.StateClosed:
		return FedifyStep{Verdict: Verdict{Decision: kvbreaker.Send}}
	case rec.State == kvbreaker.StateHalfOpen:
		if !rec.HalfOpened.IsZero() {
			staleAt := rec.HalfOpened.Add(c.RecoveryDelay)
			if now.Before(staleAt) {
				retry := now.Add(c.ReleaseInterval)
				if !retry.Before(staleAt) {
					retry = staleAt
				}
				return FedifyStep{Verdict: Verdict{Decision: kvbreaker.Hold, RetryAt: holdRetry(now, heldSince, retry, c.HeldActivityTTL)}}
			}
		}
		next := rec
		next.HalfOpened = now
		// A stale probe is taken over without a state change.
		return FedifyStep{Verdict: Verdict{Decision: kvbreaker.Probe}, Write: machine.WritePut, Record: next}
	}
	opened := rec.Opened
	if opened.IsZero() {
		opened = now
	}
	if probeAt := opened.Add(c.RecoveryDelay); now.Before(probeAt) {
		return FedifyStep{Verdict: Verdict{Decision: kvbreaker.Hold, RetryAt: holdRetry(now, heldSince, probeAt, c.HeldActivityTTL)}}
	}
	next := rec
	next.State = kvbreaker.StateHalfOpen
	next.HalfOpened = now
	return FedifyStep{
		Verdict:    Verdict{Decision: kvbreaker.Probe},
		Write:      machine.WritePut,
		Record:     next,
		Transition: Transition{From: kvbreaker.StateOpen, To: kvbreaker.StateHalfOpen},
	}
}

// FedifyRecordFailure is fedify's recordFailure on a record read as (rec,
// found): an open circuit ignores the failure (no write); otherwise the
// failure is appended and pruned, and a half-open circuit, or one whose
// policy fails, opens with opened = now; else it stays closed.
func FedifyRecordFailure(rec FedifyRecord, found bool, now time.Time, c *FedifyConfig) FedifyStep {
	if found && rec.State == kvbreaker.StateOpen {
		return FedifyStep{}
	}
	var old []time.Time
	from := kvbreaker.StateClosed
	if found {
		old, from = rec.Failures, rec.State
	}
	failures := c.prune(append(slices.Clip(old), now), now)
	if from == kvbreaker.StateHalfOpen || c.failed(failures) {
		return FedifyStep{
			Write:      machine.WritePut,
			Record:     FedifyRecord{State: kvbreaker.StateOpen, Failures: failures, Opened: now},
			Transition: Transition{From: from, To: kvbreaker.StateOpen},
		}
	}
	return FedifyStep{Write: machine.WritePut, Record: FedifyRecord{State: kvbreaker.StateClosed, Failures: failures}}
}

// FedifyRecordSuccess is fedify's recordSuccess (and
// recordReachableFailure): delete the record, reporting X→closed unless it
// was closed; nothing to do without a record.
func FedifyRecordSuccess(rec FedifyRecord, found bool) FedifyStep {
	if !found {
		return FedifyStep{}
	}
	st := FedifyStep{Write: machine.WriteDelete}
	if rec.State != kvbreaker.StateClosed {
		st.Transition = Transition{From: rec.State, To: kvbreaker.StateClosed}
	}
	return st
}

// CheckOpenedInvariant reports whether rec satisfies the design note's
// observation that opened == max(failures) in every reachable state: an
// open or half-open record's Opened is its newest failure, and a closed
// record has no Opened.
func CheckOpenedInvariant(rec FedifyRecord) error {
	if rec.State == kvbreaker.StateClosed {
		if !rec.Opened.IsZero() {
			return fmt.Errorf("closed record has opened = %v", rec.Opened)
		}
		return nil
	}
	if len(rec.Failures) == 0 {
		return fmt.Errorf("%v record has no failures (opened = %v)", rec.State, rec.Opened)
	}
	if m := slices.MaxFunc(rec.Failures, time.Time.Compare); !m.Equal(rec.Opened) {
		return fmt.Errorf("%v record has opened = %v but max(failures) = %v", rec.State, rec.Opened, m)
	}
	return nil
}

// Fedify is a Go model of fedify 2.3.x's CircuitBreaker
// (packages/fedify/src/federation/circuit-breaker.ts) over its own TTL
// store: the reference model, labelled "fedify-model". It is not fedify:
// TestAgainstFedify drives fedify 2.3.8's own CircuitBreaker on the same
// random call streams and compares every answer (opt-in, it needs node and
// npm).
//
// It counts the store requests fedify 2.3.8 makes (dist/circuit-breaker-*.mjs
// and the outbox in dist/middleware-*.mjs), as Cost reports them:
//
//   - beforeSend: none for a drop (decided before reading), else one get
//     (#get); one write more (#replace: cas, or set without cas) to take a
//     probe; a hold or send writes nothing.
//   - recordSuccess: one get; one write more (#replace with undefined: cas,
//     or delete) when a record exists.
//   - recordFailure: one get; one write more unless the record is open.
//     The outbox then calls beforeSend once more for the failed message (to
//     hold it or let its retry policy run), one get more; what that call
//     decides is not modelled (it writes only when the record is open past
//     its probe instant: a late failure at a restraint's end).
//
// Contention retries (a lost cas rereads) cannot happen here: every call is
// one atomic step. Not counted: the one-off legacy-state sweep a process
// runs at most once per 168 h, and only over a KvStore with cas.
type Fedify struct {
	cfg   FedifyConfig
	store ttlStore[FedifyRecord]
	name  string
	cost  Cost
}

// Cost implements Coster.
func (f *Fedify) Cost() Cost { return f.cost }

// NewFedify normalises o and returns an empty Fedify.
func NewFedify(o FedifyOptions, opts ...Option) (*Fedify, error) {
	c, err := NewFedifyConfig(o)
	if err != nil {
		return nil, err
	}
	so := applyOptions(opts)
	return &Fedify{cfg: c, store: newTTLStore[FedifyRecord](so), name: "fedify-model" + so.suffix()}, nil
}

// Config returns the normalised options, including the StateTTL in use.
func (f *Fedify) Config() FedifyConfig { return f.cfg }

// Name returns "fedify-model", with "@ttl" and the cap over a capped store.
func (f *Fedify) Name() string { return f.name }

func (f *Fedify) apply(host string, now time.Time, st FedifyStep) {
	if st.Write != machine.WriteNone {
		f.cost.Writes++
	}
	switch st.Write {
	case machine.WritePut:
		f.store.put(host, st.Record, now, f.cfg.StateTTL)
	case machine.WriteDelete:
		f.store.del(host)
	}
}

// Allow is beforeSend. A drop is decided before reading the store.
func (f *Fedify) Allow(host string, now, heldSince time.Time) (Verdict, Transition) {
	if holdExpired(now, heldSince, f.cfg.HeldActivityTTL) {
		return Verdict{Decision: kvbreaker.Drop}, Transition{}
	}
	f.cost.Reads++
	rec, ok := f.store.get(host, now)
	st := FedifyBeforeSend(rec, ok, now, heldSince, &f.cfg)
	f.apply(host, now, st)
	return st.Verdict, st.Transition
}

// Failure is recordFailure (and counts the outbox's beforeSend after it).
func (f *Fedify) Failure(host string, now time.Time) Transition {
	f.cost.Reads += 2
	rec, ok := f.store.get(host, now)
	st := FedifyRecordFailure(rec, ok, now, &f.cfg)
	f.apply(host, now, st)
	return st.Transition
}

// Success is recordSuccess.
func (f *Fedify) Success(host string, now time.Time) Transition {
	f.cost.Reads++
	rec, ok := f.store.get(host, now)
	st := FedifyRecordSuccess(rec, ok)
	f.apply(host, now, st)
	return st.Transition
}

// Live implements Model.
func (f *Fedify) Live(host string, now time.Time) bool {
	_, ok := f.store.get(host, now)
	return ok
}

// Restraint implements Model: an open record restrains until opened +
// recoveryDelay, a half-open one until halfOpened + recoveryDelay.
func (f *Fedify) Restraint(host string, now time.Time) (time.Time, bool) {
	rec, ok := f.store.get(host, now)
	switch {
	case !ok || rec.State == kvbreaker.StateClosed:
		return time.Time{}, false
	case rec.State == kvbreaker.StateHalfOpen:
		return rec.HalfOpened.Add(f.cfg.RecoveryDelay), true
	}
	return rec.Opened.Add(f.cfg.RecoveryDelay), true
}

// Record returns host's stored record at now, if any.
func (f *Fedify) Record(host string, now time.Time) (FedifyRecord, bool) {
	return f.store.get(host, now)
}
