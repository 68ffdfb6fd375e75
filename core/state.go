package core

import (
	"fmt"
	"time"
)

// State is a circuit's state, derived from its Record. The zero value is
// StateClosed, which is what an absent or expired record derives to.
type State int8

const (
	// StateClosed: deliveries go out and failures are counted.
	StateClosed State = iota
	// StateHalfOpen: one probe delivery is in flight; others are held.
	StateHalfOpen
	// StateOpen: deliveries are held until the recovery delay has passed.
	StateOpen
)

// String returns "closed", "half-open" or "open", the labels OnStateChange
// reports.
func (s State) String() string {
	switch s {
	case StateClosed:
		return "closed"
	case StateHalfOpen:
		return "half-open"
	case StateOpen:
		return "open"
	}
	return fmt.Sprintf("unknown state: %d", int(s))
}

// Decision is what a caller should do with a delivery.
type Decision int8

const (
	// Send: deliver now.
	Send Decision = iota
	// Hold: do not deliver; ask again at Verdict.RetryAt.
	Hold
	// Probe: deliver now as the fleet's single half-open trial; report its
	// outcome with Success, ReachableFailure or Failure.
	Probe
	// Drop: the message has been held for HoldLimit; give it up.
	Drop
)

// String returns "send", "hold", "probe" or "drop".
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

// Record is the whole persisted state of one host. The zero Record is what an
// absent record reads as: closed, no failures.
type Record struct {
	// Failures are the failure instants that still count, oldest first.
	Failures []time.Time
	// RestrainedUntil: deliveries are held until this instant. Zero means
	// not restrained (closed).
	RestrainedUntil time.Time
	// Probing is set while a half-open probe is in flight.
	Probing bool
}

// State derives the circuit state: closed when not restrained, half-open when
// restrained with a probe in flight, open otherwise.
func (r *Record) State() State {
	switch {
	case r.RestrainedUntil.IsZero():
		return StateClosed
	case r.Probing:
		return StateHalfOpen
	}
	return StateOpen
}

// IsZero reports whether r carries no information, i.e. is what an absent
// record reads as.
func (r *Record) IsZero() bool {
	return len(r.Failures) == 0 && r.RestrainedUntil.IsZero() && !r.Probing
}

// Opened is the instant the circuit last opened: the newest failure, since a
// circuit opens exactly at the failure that trips it and failures are ignored
// while it is open. Zero when there are no failures.
func (r *Record) Opened() time.Time {
	if len(r.Failures) == 0 {
		return time.Time{}
	}
	return r.Failures[len(r.Failures)-1]
}
