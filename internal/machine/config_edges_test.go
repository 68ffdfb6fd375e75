package machine

import (
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

// The tests in this file kill mutants (go run ./tools/mutants -pkg
// internal/machine) that the package's other tests let live.

// TestNewConfigEdges: the settings at the edges of what NewConfig accepts,
// one nanosecond or one failure either side.
func TestNewConfigEdges(t *testing.T) {
	policy := func([]time.Time) bool { return false }
	for _, tc := range []struct {
		name   string
		s      Config
		traits driver.Traits
		want   string // "" to accept
	}{
		{name: "history below one", s: Config{HistoryLimit: -1}, want: "HistoryLimit is -1: set at least 1"},
		{name: "history at the codec's limit", s: Config{HistoryLimit: record.MaxFailures, FailurePolicy: policy, StateTTL: time.Hour}},
		{name: "negative StateTTL", s: Config{StateTTL: -1}, want: "StateTTL is -1ns: set at least"},
		{name: "margin of 1ns", s: Config{TTLMargin: 1}, want: "TTLMargin is 1ns but this store"},
		{name: "skew beyond a store's 1ns", s: Config{ClockSkew: 2}, traits: driver.Traits{MaxClockSkew: 1}, want: "ClockSkew is 2ns but this store's physical expiry covers at most 1ns"},
		{name: "skew at a store's 1ns", s: Config{ClockSkew: 1}, traits: driver.Traits{MaxClockSkew: 1}},
	} {
		_, err := NewConfig(tc.s, tc.traits)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: NewConfig = %v, want it accepted", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: NewConfig = %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// TestStepChanged: a step is a transition exactly when its states differ.
func TestStepChanged(t *testing.T) {
	for _, tc := range []struct {
		from, to record.State
		want     bool
	}{
		{record.StateClosed, record.StateClosed, false},
		{record.StateClosed, record.StateOpen, true},
		{record.StateOpen, record.StateHalfOpen, true},
		{record.StateHalfOpen, record.StateHalfOpen, false},
	} {
		s := Step{From: tc.from, To: tc.to}
		if got := s.Changed(); got != tc.want {
			t.Errorf("Step{%v → %v}.Changed() = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}
