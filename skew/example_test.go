package skew_test

import (
	"context"
	"fmt"
	"time"

	"github.com/kvbreaker/kvbreaker/skew"
)

// The margin experiment for etcd's profile on a manual clock: at the
// required margin no probe is demoted; one millisecond less and some are.
func ExampleMarginSim() {
	need := skew.Etcd.RequiredMargin(time.Second)
	for _, m := range []time.Duration{need, need - time.Millisecond} {
		res, err := skew.MarginSim{Profile: skew.Etcd, Skew: time.Second, Margin: m, Seed: 2}.Run(context.Background())
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("margin %v: demoted %v\n", m, res.Demoted > 0)
	}
	// Output:
	// margin 3s: demoted false
	// margin 2.999s: demoted true
}
