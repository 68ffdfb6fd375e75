package nats_test

import (
	"context"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	kvnats "github.com/kvbreaker/kvbreaker/backends/nats"
	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/mirrortest"
)

// mirrorFleetSettings: a circuit that stays open through the test.
var mirrorFleetSettings = kvbreaker.Settings{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: time.Hour}

// TestMirrorFleet: eight Breakers with a mirror, each with a connection of
// its own (the odd ones through a fault proxy), over one prefix. A circuit
// one opens reaches every other within twice the p99 feed delay measured
// in the run; then the proxy resets the odd ones' connections and, while
// their feeds are down, another Breaker opens a second circuit: they
// decide from the store meanwhile, and from the mirror again once
// resynchronised, always as the store says.
func TestMirrorFleet(t *testing.T) {
	p, err := faultproxy.Start(server.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	prefix := uniquePrefix(t)
	var stores []driver.Store
	var broken []int
	for i := range 8 {
		url := server.URL()
		if i%2 == 1 {
			url, broken = "nats://"+p.Addr(), append(broken, i)
		}
		st, err := kvnats.New(t.Context(), connect(t, url), bucket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		ps, err := kvbreaker.Prefixed(st, prefix)
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, ps)
	}
	f := mirrortest.Start(t, stores, mirrorFleetSettings)
	f.Propagate(t, 0, "open.example", 16)
	t.Log(f.BreakAndChange(t, mirrortest.Break{
		Host:   "meanwhile.example",
		Writer: 0,
		Broken: broken,
		Do: func(context.Context) error {
			p.ResetAll()
			return nil
		},
	}))
}
