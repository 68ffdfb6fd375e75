package redis_test

import (
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/mirrortest"
)

// TestMirrorFleet: eight Breakers with a mirror, each with a client of its
// own, over one prefix. A circuit one opens reaches every other within
// twice the p99 feed delay measured in the run; then CLIENT KILL ends
// every follower's connections (the harness's BreakFeed) and, while the
// feeds are down, one Breaker opens a second circuit: every Breaker
// decides from the store meanwhile, and from the mirror again once
// resynchronised, always as the store says.
func TestMirrorFleet(t *testing.T) {
	prefix := uniquePrefix(t)
	var stores []driver.Store
	var broken []int
	for i := range 8 {
		stores = append(stores, newStoreUnder(t, newClient(t, srv.Addr()), prefix))
		broken = append(broken, i)
	}
	f := mirrortest.Start(t, stores, kvbreaker.Settings{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: time.Hour})
	f.Propagate(t, 0, "open.example", 16)
	h := &harness{direct: newClient(t, srv.Addr())}
	t.Log(f.BreakAndChange(t, mirrortest.Break{Host: "meanwhile.example", Writer: 0, Broken: broken, Do: h.BreakFeed}))
}
