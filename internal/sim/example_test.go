package sim_test

import (
	"fmt"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/sim"
)

// Run three breakers on one simulated hour of a small fleet and compare
// them with the fedify reference.
func ExampleRun() {
	r, err := sim.Run(sim.Scenario{Seed: 1, Workers: 8, Hosts: 50, Duration: time.Hour})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("no breaker: %d sends to down hosts\n", r.Baseline.SendsToDownHosts)
	for _, m := range r.Models {
		fmt.Printf("%s: %d sends to down hosts, agreement %.2f, %d unsafe, %d records after quiet\n",
			m.Model, m.SendsToDownHosts, m.Agreement, m.UnsafeDivergences, m.RecordsLeftAfterQuiet)
	}
	// Output:
	// no breaker: 92 sends to down hosts
	// fedify-4field: 26 sends to down hosts, agreement 1.00, 0 unsafe, 4 records after quiet
	// seed-2field: 26 sends to down hosts, agreement 1.00, 0 unsafe, 0 records after quiet
	// kvbreaker: 26 sends to down hosts, agreement 1.00, 0 unsafe, 0 records after quiet
}
