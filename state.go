package kvbreaker

import (
	"github.com/kvbreaker/kvbreaker/internal/machine"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

// State is a circuit's state, derived from the host's stored record. The zero value is
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
func (s State) String() string { return record.State(s).String() }

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
func (d Decision) String() string { return machine.Decision(d).String() }
