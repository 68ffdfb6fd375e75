package faultfleet

import (
	"context"
	"testing"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
	"github.com/kvbreaker/kvbreaker/driver"
)

// Proxied runs Run with the faults of a faultproxy in front of upstream,
// the server's address: newStore makes a worker's store over the proxy's
// address (a client or pool of its own, as a separate process would
// have), which Proxied puts under prefix; observer, already under prefix,
// reads the server directly. It logs the report, and when a check fails
// fails t with it and with what server says (whether the server process
// still runs, its output), since a server that died looks like faults.
func Proxied(t *testing.T, upstream, prefix string, observer driver.Store, newStore func(addr string) (driver.Store, error), server func() string) {
	t.Helper()
	p, err := faultproxy.Start(upstream)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	rep, err := Run(t.Context(), Config{
		NewStore: func(context.Context, int) (driver.Store, error) {
			s, err := newStore(p.Addr())
			if err != nil {
				return nil, err
			}
			return kvbreaker.Prefixed(s, prefix)
		},
		Observer: observer,
		Proxy:    p,
		Short:    testing.Short(),
		Logf:     t.Logf,
	})
	t.Log(rep)
	if err != nil {
		t.Fatalf("%v\n%s", err, server())
	}
}
