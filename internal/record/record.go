package record

import (
	"fmt"
	"time"
)

// State is a circuit's state, derived from its Record; kvbreaker.State has
// the same values. The zero value is StateClosed, which is what an absent or
// expired record derives to.
type State int8

const (
	StateClosed State = iota
	StateHalfOpen
	StateOpen
)

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

	// Backoff counts the probes that failed in a row since the circuit
	// last closed; with recovery back-off it lengthens the next
	// restraint. Zero unless back-off is on.
	Backoff int
	// Since is when the current outage began: the instant the circuit
	// opened from closed, kept through failed probes and, after the
	// successful one, through the paced release. Zero unless the paced
	// release is on.
	Since time.Time
	// Released is the instant a probe succeeded, on a closed record kept
	// for the paced release: held messages come back spread over the ramp
	// that starts there. Zero otherwise; set only with Since and without
	// a restraint.
	Released time.Time
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
	return len(r.Failures) == 0 && r.RestrainedUntil.IsZero() && !r.Probing &&
		r.Backoff == 0 && r.Since.IsZero() && r.Released.IsZero()
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
