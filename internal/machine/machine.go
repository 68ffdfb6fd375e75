package machine

import (
	"fmt"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/record"
)

// Decision is AllowStep's answer; kvbreaker.Decision has the same values.
type Decision int8

const (
	Send Decision = iota
	Hold
	Probe
	Drop
)

func (d Decision) String() string {
	switch d {
	case Send:
		return "send"
	case Hold:
		return "hold"
	case Probe:
		return "probe"
	case Drop:
		return "drop"
	}
	return fmt.Sprintf("unknown decision: %d", int(d))
}

// Write says what a transition does to the stored record.
type Write int8

const (
	// WriteNone: leave the record as it is.
	WriteNone Write = iota
	// WritePut: store Step.Record.
	WritePut
	// WriteDelete: delete the record.
	WriteDelete
)

// Step is the result of a pure transition.
type Step struct {
	// Record is the next record; meaningful when Write is WritePut.
	Record record.Record
	Write  Write
	// Decision and RetryAt answer AllowStep; RetryAt is set for Hold.
	Decision Decision
	RetryAt  time.Time
	// From and To are the derived states before and after; a transition
	// happened when they differ.
	From, To record.State
}

// Changed reports whether the step is a state transition.
func (s *Step) Changed() bool { return s.From != s.To }

// HoldExpired reports whether a message first held at heldSince has reached
// the hold limit at now and must be dropped. A zero heldSince never expires.
func (c *Config) HoldExpired(heldSince, now time.Time) bool {
	return !heldSince.IsZero() && !now.Before(heldSince.Add(c.HoldLimit))
}

// AllowStep decides a delivery to a host whose record is rec, for a message
// first held at heldSince (zero for a fresh message). It returns Drop at the
// hold limit, Send when closed, Hold while restrained, and Probe (writing
// RestrainedUntil = now+RecoveryDelay, Probing) once the restraint has passed,
// which also takes over a probe that went unanswered for RecoveryDelay. The
// closed path does not allocate.
func AllowStep(rec record.Record, now, heldSince time.Time, c *Config) Step {
	from := rec.State()
	st := Step{From: from, To: from}
	switch {
	case c.HoldExpired(heldSince, now):
		st.Decision = Drop
	case from == record.StateClosed:
		st.Decision = Send
	case now.Before(rec.RestrainedUntil):
		if c.Future(rec, now) {
			// A writer whose clock runs ahead of this worker's by more
			// than the fleet's bound wrote this restraint. Held to it, a
			// host would wait as long as that clock is fast (and, where
			// the store expires by the writer's clock, its record would
			// live as long). Restore what a correct writer opening the
			// circuit now would store; the write also replaces the TTL.
			rec = c.reanchor(rec, now)
			st.Record, st.Write = rec, WritePut
		}
		retry := rec.RestrainedUntil
		if from == record.StateHalfOpen {
			// A probe is in flight: re-check often, it may succeed soon.
			retry = minTime(now.Add(c.ReleaseInterval), retry)
		}
		if heldSince.IsZero() {
			heldSince = now
		}
		// Never ask a message to wait past the instant it is dropped.
		st.RetryAt = minTime(retry, heldSince.Add(c.HoldLimit))
		st.Decision = Hold
	default:
		st.Record = record.Record{Failures: clampFuture(rec.Failures, now), RestrainedUntil: now.Add(c.RecoveryDelay), Probing: true}
		st.Write = WritePut
		st.Decision = Probe
		st.To = record.StateHalfOpen
	}
	return st
}

// Future reports whether rec holds an instant that no writer whose clock is
// within ClockSkew of true time could have written by now, by a reader
// within ClockSkew too: a failure after now + 2×ClockSkew, or a restraint
// ending after now + RecoveryDelay + 2×ClockSkew (a restraint is written as
// the writer's now + RecoveryDelay).
func (c *Config) Future(rec record.Record, now time.Time) bool {
	lim := now.Add(2 * c.ClockSkew)
	if n := len(rec.Failures); n > 0 && rec.Failures[n-1].After(lim) {
		return true
	}
	return rec.RestrainedUntil.After(lim.Add(c.RecoveryDelay))
}

// reanchor returns rec as a writer on this clock would have written it: no
// failure after now, and a restraint ending no later than now +
// RecoveryDelay.
func (c *Config) reanchor(rec record.Record, now time.Time) record.Record {
	return record.Record{
		Failures:        clampFuture(rec.Failures, now),
		RestrainedUntil: minTime(rec.RestrainedUntil, now.Add(c.RecoveryDelay)),
		Probing:         rec.Probing,
	}
}

// FailureStep records a failed delivery at now. While open (restrained, no
// probe in flight) failures are ignored: they come from sends decided before
// the circuit opened. A failed probe reopens the circuit at once; otherwise
// the failure is counted and the circuit opens when the policy trips.
func FailureStep(rec record.Record, now time.Time, c *Config) Step {
	from := rec.State()
	st := Step{From: from, To: from}
	if from == record.StateOpen {
		return st
	}
	next := record.Record{Failures: c.prune(rec.Failures, now)}
	switch {
	case rec.Probing:
		next.RestrainedUntil = now.Add(c.RecoveryDelay)
		st.To = record.StateOpen
	case c.tripped(next.Failures):
		next.RestrainedUntil = now.Add(c.RecoveryDelay)
		st.To = record.StateOpen
	}
	st.Record = next
	st.Write = WritePut
	return st
}

// SuccessStep records that the host answered (a success, or a
// ReachableFailure such as a 4xx): the record is deleted and the circuit
// closes. An absent record needs no write.
func SuccessStep(rec record.Record) Step {
	st := Step{From: rec.State(), To: record.StateClosed}
	if !rec.IsZero() {
		st.Write = WriteDelete
	}
	return st
}

// AbandonStep releases a probe claim whose delivery was given up (its caller
// cancelled it): a probe that never reached the host says nothing about it,
// and left in place the claim would hold every other delivery for
// RecoveryDelay. claim is the RestrainedUntil the claiming AllowStep wrote.
// If rec is still that claim (probing, restrained until claim), the next
// record keeps the failures, drops the probe bit and ends the restraint at
// now, so the next AllowStep anywhere elects a probe at once; the circuit
// goes half-open → open. Otherwise (the probe was answered, taken over, or
// the record replaced) another writer owns the record and nothing is
// written.
func AbandonStep(rec record.Record, claim, now time.Time) Step {
	from := rec.State()
	st := Step{From: from, To: from}
	if !rec.Probing || claim.IsZero() || !rec.RestrainedUntil.Equal(claim) {
		return st
	}
	st.Record = record.Record{Failures: rec.Failures, RestrainedUntil: now}
	st.Write = WritePut
	st.To = record.StateOpen
	return st
}

// prune returns a new slice: failures plus now, in time order, without those
// outside the window (default policy only), keeping the newest
// HistoryLimit.
func (c *Config) prune(failures []time.Time, now time.Time) []time.Time {
	out := make([]time.Time, 0, min(len(failures)+1, c.HistoryLimit))
	cut := now.Add(-c.FailureWindow)
	add := func(t time.Time) {
		if c.FailurePolicy == nil && t.Before(cut) {
			return
		}
		if len(out) == c.HistoryLimit {
			out = append(out[:0], out[1:]...)
		}
		out = append(out, t)
	}
	for _, f := range failures {
		// Clocks differ across the fleet: a failure stamped by a faster
		// clock is clamped to this writer's now (see clampFuture), which
		// also keeps the history sorted.
		add(minTime(f, now))
	}
	add(now)
	return out
}

// clampFuture returns failures with every instant after now (stamped by a
// worker whose clock runs ahead of this writer's) moved to now. The record
// this writer stores lives until its now + StateTTL; a failure counts until
// its instant + FailureWindow, so without the clamp a fast clock's failure
// could outlive the record by up to 2×ClockSkew on a reader-filtered store,
// and the failure would stop counting early when the record vanished. The
// common case, no future instant, returns failures itself and allocates
// nothing.
func clampFuture(failures []time.Time, now time.Time) []time.Time {
	if len(failures) == 0 || !now.Before(failures[len(failures)-1]) {
		return failures
	}
	out := make([]time.Time, len(failures))
	for i, f := range failures {
		out[i] = minTime(f, now)
	}
	return out
}

// tripped is the open rule: the custom policy, or at least FailureThreshold
// failures whose newest FailureThreshold fit in one FailureWindow.
func (c *Config) tripped(f []time.Time) bool {
	if c.FailurePolicy != nil {
		return c.FailurePolicy(f)
	}
	n := c.FailureThreshold
	return len(f) >= n && f[len(f)-1].Sub(f[len(f)-n]) <= c.FailureWindow
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
