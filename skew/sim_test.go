package skew_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker/skew"
)

// TestMarginKeepsProbes is DESIGN §2's key property, in simulated time: for
// every backend profile, across random clock offsets within δ and write
// phases, no probe is demoted when TTLMargin meets RequiredMargin(δ), and
// with one millisecond less the demotion is observed (the bound is tight).
//
//	go test ./skew -run TestMarginKeepsProbes -v
func TestMarginKeepsProbes(t *testing.T) {
	const delta = time.Second
	for _, p := range skew.Profiles() {
		t.Run(p.Name, func(t *testing.T) {
			need := p.RequiredMargin(delta)
			for _, seed := range []uint64{1, 2, 3} {
				t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						at := run(t, p, delta, need, seed)
						below := run(t, p, delta, need-time.Millisecond, seed)
						if at.Demoted != 0 {
							t.Errorf("%v\n%v", at, at.Examples)
						}
						if below.Demoted == 0 {
							t.Errorf("%v: a margin below the requirement went unnoticed, so the bound is not shown tight", below)
						}
					})
				})
			}
		})
	}
}

func run(t *testing.T, p skew.Profile, delta, margin time.Duration, seed uint64) skew.MarginResult {
	t.Helper()
	res, err := skew.MarginSim{Profile: p, Skew: delta, Margin: margin, Seed: seed, Time: skew.SystemTime{}}.Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res)
	return res
}
