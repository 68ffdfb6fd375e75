package kvbreaker

import (
	"testing"

	"github.com/kvbreaker/kvbreaker/internal/machine"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

// TestStateAndDecisionMatchTheMachine: the user's State and Decision are
// converted from the machine's by value, so their constants must agree.
func TestStateAndDecisionMatchTheMachine(t *testing.T) {
	for _, c := range []struct{ user, machine int8 }{
		{int8(StateClosed), int8(record.StateClosed)},
		{int8(StateHalfOpen), int8(record.StateHalfOpen)},
		{int8(StateOpen), int8(record.StateOpen)},
		{int8(Send), int8(machine.Send)},
		{int8(Hold), int8(machine.Hold)},
		{int8(Probe), int8(machine.Probe)},
		{int8(Drop), int8(machine.Drop)},
	} {
		if c.user != c.machine {
			t.Errorf("user value %d, machine value %d", c.user, c.machine)
		}
	}
	if StateHalfOpen.String() != "half-open" || Drop.String() != "drop" || State(9).String() != "unknown state: 9" {
		t.Errorf("String: %q %q %q", StateHalfOpen, Drop, State(9))
	}
}
