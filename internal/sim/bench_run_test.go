package sim

import "testing"

// BenchmarkRun is the simulation make demo runs (the defaults, 6 simulated
// hours), its models in one goroutine and spread over follower lanes as
// Run spreads them (one per core beyond the first): the ratio is what the
// lanes save in wall time on this machine, which is only as much as it has
// idle cores. cpu-ns/op is the process's CPU time, user and system, per
// run: on a shared machine it leaves out the waits for a core that ns/op
// counts, and it is what the lanes cost in all.
func BenchmarkRun(b *testing.B) {
	for _, bc := range []struct {
		name  string
		lanes int
	}{{"sequential", -1}, {"lanes", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			cpu0, ok := processCPU()
			for b.Loop() {
				if _, err := Run(Scenario{lanes: bc.lanes}); err != nil {
					b.Fatal(err)
				}
			}
			if cpu1, _ := processCPU(); ok {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}
