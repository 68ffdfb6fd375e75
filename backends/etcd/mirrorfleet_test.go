package etcd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/mirrortest"
)

// mirrorFleetSettings: a circuit that stays open through the test.
var mirrorFleetSettings = kvbreaker.Settings{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: time.Hour}

// TestMirrorFleet: eight Breakers with a mirror, each with a client of its
// own (the odd ones through a fault proxy), over one prefix. A circuit one
// opens reaches every other within twice the p99 feed delay measured in
// the run; then the proxy resets the odd ones' connections and, while
// their feeds are down, another Breaker opens a second circuit: they
// decide from the store meanwhile, and from the mirror again once
// resynchronised, always as the store says.
func TestMirrorFleet(t *testing.T) {
	p, err := faultproxy.Start(strings.TrimPrefix(endpoints[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	prefix := uniquePrefix(t)
	var stores []driver.Store
	var broken []int
	for i := range 8 {
		ep := endpoints
		if i%2 == 1 {
			ep, broken = []string{"http://" + p.Addr()}, append(broken, i)
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: ep, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		st, err := etcd.New(cli)
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
