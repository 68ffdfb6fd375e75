package machine

import (
	"fmt"
	"math"
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
// hold limit, Send when closed (but Hold for a held message whose turn in a
// paced release has not come, see ReleaseAt), Hold while restrained, and
// Probe (writing RestrainedUntil = now+RecoveryDelay, Probing) once the
// restraint has passed, which also takes over a probe that went unanswered
// for RecoveryDelay. The closed path does not allocate.
func AllowStep(rec record.Record, now, heldSince time.Time, c *Config) Step {
	from := rec.State()
	st := Step{From: from, To: from}
	switch {
	case c.HoldExpired(heldSince, now):
		st.Decision = Drop
	case from == record.StateClosed:
		st.Decision = Send
		if heldSince.IsZero() || rec.Released.IsZero() || c.ReleaseRamp == 0 {
			break
		}
		if at := c.ReleaseAt(rec, heldSince); now.Before(at) {
			st.Decision = Hold
			st.RetryAt = minTime(at, heldSince.Add(c.HoldLimit))
		}
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
		st.Record = record.Record{
			Failures: clampFuture(rec.Failures, now), RestrainedUntil: now.Add(c.RecoveryDelay), Probing: true,
			Backoff: c.level(rec), Since: c.since(rec, now),
		}
		st.Write = WritePut
		st.Decision = Probe
		st.To = record.StateHalfOpen
	}
	return st
}

// ReleaseAt is when a message held since heldSince may go again to a host
// whose probe succeeded, under the paced release: the held messages come
// back in the order they were held, spread over a ramp from rec.Released as
// they were spread over the outage (rec.Since to rec.Released), the ramp
// twice as long as the outage, so the backlog returns at half the rate it
// built up, but no longer than ReleaseRamp. Every worker computes it from
// the record and the message alone, so the fleet paces without talking.
// Before the ramp, or without one, it is rec.Released.
func (c *Config) ReleaseAt(rec record.Record, heldSince time.Time) time.Time {
	span := rec.Released.Sub(rec.Since)
	ramp := c.ramp(span)
	if ramp <= 0 {
		return rec.Released
	}
	pos := float64(heldSince.Sub(rec.Since)) / float64(span)
	pos = min(max(pos, 0), 1)
	// Whole milliseconds, rounded up: the Breaker decides at its clock
	// truncated to the millisecond, and a turn between two of its
	// milliseconds would be held until an instant already past, again and
	// again.
	ms := math.Ceil(pos * float64(ramp.Milliseconds()))
	return rec.Released.Add(time.Duration(ms) * time.Millisecond)
}

// ramp is the paced release's length after an outage of span.
func (c *Config) ramp(span time.Duration) time.Duration {
	if span <= 0 || c.ReleaseRamp == 0 {
		return 0
	}
	if span > c.ReleaseRamp/2 {
		return c.ReleaseRamp
	}
	return 2 * span
}

// level is rec's back-off level as this configuration keeps it: zero
// without back-off, so turning it off lets records forget it.
func (c *Config) level(rec record.Record) int {
	if c.MaxRecoveryDelay == 0 {
		return 0
	}
	return min(rec.Backoff, c.backoffCap)
}

// since is when rec's outage began, kept only with the paced release: an
// open record written without it dates from its newest failure, the
// instant it last opened, and failing that from now.
func (c *Config) since(rec record.Record, now time.Time) time.Time {
	switch {
	case c.ReleaseRamp == 0:
		return time.Time{}
	case !rec.Since.IsZero():
		return minTime(rec.Since, now)
	case !rec.Opened().IsZero():
		return minTime(rec.Opened(), now)
	}
	return now
}

// Future reports whether rec holds an instant that no writer whose clock is
// within ClockSkew of true time could have written by now, by a reader
// within ClockSkew too: a failure after now + 2×ClockSkew, or a restraint
// ending after now + its length + 2×ClockSkew (a restraint is written as
// the writer's now + RecoveryDelay, or with back-off the Restraint of the
// record's level).
func (c *Config) Future(rec record.Record, now time.Time) bool {
	lim := now.Add(2 * c.ClockSkew)
	if n := len(rec.Failures); n > 0 && rec.Failures[n-1].After(lim) {
		return true
	}
	return rec.RestrainedUntil.After(lim.Add(c.Restraint(c.level(rec))))
}

// reanchor returns rec as a writer on this clock would have written it: no
// failure after now, and a restraint ending no later than now + the
// restraint of its level.
func (c *Config) reanchor(rec record.Record, now time.Time) record.Record {
	return record.Record{
		Failures:        clampFuture(rec.Failures, now),
		RestrainedUntil: minTime(rec.RestrainedUntil, now.Add(c.Restraint(c.level(rec)))),
		Probing:         rec.Probing,
		Backoff:         c.level(rec),
		Since:           c.since(rec, now),
	}
}

// FailureStep records a failed delivery at now. While open (restrained, no
// probe in flight) failures are ignored: they come from sends decided before
// the circuit opened. A failed probe reopens the circuit at once, for the
// restraint of the next back-off level; otherwise the failure is counted and
// the circuit opens, for RecoveryDelay, when the policy trips. A closed
// record keeps its paced release while the ramp lasts.
func FailureStep(rec record.Record, now time.Time, c *Config) Step {
	from := rec.State()
	st := Step{From: from, To: from}
	if from == record.StateOpen {
		return st
	}
	next := record.Record{Failures: c.prune(rec.Failures, now)}
	switch {
	case rec.Probing:
		next.Backoff = c.nextLevel(c.level(rec))
		next.RestrainedUntil = now.Add(c.Restraint(next.Backoff))
		next.Since = c.since(rec, now)
		st.To = record.StateOpen
	case c.tripped(next.Failures):
		next.RestrainedUntil = now.Add(c.RecoveryDelay)
		if c.ReleaseRamp > 0 {
			next.Since = now
		}
		st.To = record.StateOpen
	case c.releasing(rec, now):
		next.Since, next.Released = rec.Since, rec.Released
	}
	st.Record = next
	st.Write = WritePut
	return st
}

// releasing reports whether closed record rec's paced release still runs
// at now.
func (c *Config) releasing(rec record.Record, now time.Time) bool {
	return c.ReleaseRamp > 0 && !rec.Released.IsZero() && rec.RestrainedUntil.IsZero() &&
		now.Before(rec.Released.Add(c.ramp(rec.Released.Sub(rec.Since))))
}

// SuccessStep records that the host answered (a success, or a
// ReachableFailure such as a 4xx) at now: the circuit closes and its
// failures and back-off are forgotten. The record is deleted, unless a
// paced release starts (the circuit was restrained) or still runs: then
// the closed record keeps the outage's start and the release instant
// until the ramp ends. An absent record needs no write.
func SuccessStep(rec record.Record, now time.Time, c *Config) Step {
	st := Step{From: rec.State(), To: record.StateClosed}
	next := record.Record{Since: rec.Since, Released: rec.Released}
	if !rec.RestrainedUntil.IsZero() {
		next.Since, next.Released = c.since(rec, now), now
	}
	if c.releasing(next, now) {
		if !(len(rec.Failures) == 0 && rec.RestrainedUntil.IsZero() && rec.Backoff == 0) {
			st.Record, st.Write = next, WritePut
		}
		return st
	}
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
// record keeps the failures, the back-off level and the outage's start,
// drops the probe bit and ends the restraint at now, so the next AllowStep
// anywhere elects a probe at once; the circuit goes half-open → open.
// Otherwise (the probe was answered, taken over, or the record replaced)
// another writer owns the record and nothing is written.
func AbandonStep(rec record.Record, claim, now time.Time) Step {
	from := rec.State()
	st := Step{From: from, To: from}
	if !rec.Probing || claim.IsZero() || !rec.RestrainedUntil.Equal(claim) {
		return st
	}
	st.Record = record.Record{Failures: rec.Failures, RestrainedUntil: now, Backoff: rec.Backoff, Since: rec.Since}
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
