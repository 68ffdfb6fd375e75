package sim

import (
	"reflect"
	"testing"
	"time"
)

// TestLanesMatchSequential: a run whose models are spread over follower
// lanes, on their own goroutines, reports exactly what the sequential run
// reports, field for field, in scenarios that exercise every count: races
// with a store TTL below the restraint (expiries, lost records), and Zipf
// popularity with recovery back-off and the paced release. The control:
// another seed must report otherwise, or the comparison could not fail.
func TestLanesMatchSequential(t *testing.T) {
	base := Scenario{Hosts: 100, Duration: 90 * time.Minute, Workers: 16}
	races := base
	races.Races, races.StoreTTL = true, 10*time.Minute
	zipf := base
	zipf.Zipf, zipf.Seed = 1, 5
	zipf.Options.MaxRecoveryDelay, zipf.Options.ReleaseRamp = 2*time.Hour, 10*time.Minute
	for _, tc := range []struct {
		name  string
		s     Scenario
		lanes int
	}{{"races-store-ttl", races, 1}, {"zipf-backoff", zipf, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			seq := tc.s
			seq.lanes = -1
			want, err := Run(seq)
			if err != nil {
				t.Fatal(err)
			}
			par := tc.s
			par.lanes = tc.lanes
			got, err := Run(par)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%d follower lanes:\n%+v\nsequential:\n%+v", tc.lanes, got.Models, want.Models)
			}
			var lost, decisions int
			for _, m := range want.Models {
				lost += m.AfterRecordLoss + m.SilentCloses
				decisions += m.Decisions
			}
			if decisions == 0 || tc.s.StoreTTL > 0 && lost == 0 {
				t.Errorf("%d decisions, %d expiries: the scenario does not exercise the counts it compares", decisions, lost)
			}
		})
	}
	other := base
	other.Seed, other.lanes = 2, 1
	a, err := Run(other)
	if err != nil {
		t.Fatal(err)
	}
	base.lanes = -1
	b, err := Run(base)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(a, b) {
		t.Error("seeds 1 and 2 report the same: the comparison cannot fail")
	}
}
