package sim_test

import (
	"fmt"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/sim"
)

// Run the breakers on one simulated hour of a small fleet, compare them
// with the fedify reference, and print what each costs in store requests.
func ExampleRun() {
	r, err := sim.Run(sim.Scenario{Seed: 1, Workers: 8, Hosts: 50, Duration: time.Hour})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("no breaker: %d sends to down hosts\n", r.Baseline.SendsToDownHosts)
	for _, m := range r.Models {
		if m.CostOnly {
			fmt.Printf("%s: %.0f requests per 1,000 deliveries\n", m.Model, m.RequestsPer1000Deliveries)
			continue
		}
		fmt.Printf("%s: %d sends to down hosts, agreement %.2f, %d unsafe, %d records after quiet, %.0f requests per 1,000 deliveries\n",
			m.Model, m.SendsToDownHosts, m.Agreement, m.UnsafeDivergences, m.RecordsLeftAfterQuiet, m.RequestsPer1000Deliveries)
	}
	// Output:
	// no breaker: 92 sends to down hosts
	// fedify-model: 26 sends to down hosts, agreement 1.00, 0 unsafe, 4 records after quiet, 2345 requests per 1,000 deliveries
	// two-field: 26 sends to down hosts, agreement 1.00, 0 unsafe, 0 records after quiet, 2322 requests per 1,000 deliveries
	// kvbreaker: 26 sends to down hosts, agreement 1.00, 0 unsafe, 0 records after quiet, 2296 requests per 1,000 deliveries
	// kvbreaker+cache: 26 sends to down hosts, agreement 1.00, 0 unsafe, 0 records after quiet, 2163 requests per 1,000 deliveries
	// kvbreaker+mirror: 26 sends to down hosts, agreement 1.00, 0 unsafe, 0 records after quiet, 118 requests per 1,000 deliveries
	// gobreaker-distributed: 6448 requests per 1,000 deliveries
}
