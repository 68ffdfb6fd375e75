package sim

import "testing"

// BenchmarkRun is the simulation make demo runs (the defaults, 6 simulated
// hours), its models in one goroutine and spread over follower lanes as
// Run spreads them (one per core beyond the first): the ratio is what the
// lanes save in wall time on this machine, which is only as much as it has
// idle cores.
func BenchmarkRun(b *testing.B) {
	for _, bc := range []struct {
		name  string
		lanes int
	}{{"sequential", -1}, {"lanes", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Run(Scenario{lanes: bc.lanes}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
