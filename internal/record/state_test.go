package record

import (
	"testing"
	"time"
)

// TestState: a record derives to closed unless it is restrained, whatever
// failures it still counts; restrained, it is open, or half-open while a
// probe is in flight. The zero record, what an absent or expired key reads
// as, is closed.
func TestState(t *testing.T) {
	until := time.Unix(1_700_000_000, 0)
	fails := []time.Time{until.Add(-time.Minute), until.Add(-time.Second)}
	for _, tc := range []struct {
		name string
		r    Record
		want State
	}{
		{name: "zero", r: Record{}, want: StateClosed},
		{name: "failures counted, not restrained", r: Record{Failures: fails}, want: StateClosed},
		{name: "probing flag without restraint", r: Record{Probing: true}, want: StateClosed},
		{name: "restrained", r: Record{Failures: fails, RestrainedUntil: until}, want: StateOpen},
		{name: "restrained with a probe", r: Record{Failures: fails, RestrainedUntil: until, Probing: true}, want: StateHalfOpen},
	} {
		if got := tc.r.State(); got != tc.want {
			t.Errorf("%s: State() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
