package mysql_test

import (
	"context"
	"testing"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/mysql"
	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/faultfleet"
)

// TestFaultFleet runs a Breaker fleet over MariaDB through a faultproxy
// that loses and fails answers of applied statements, delays, resets and
// blackholes, and checks with faultfleet that no failure is counted twice,
// every probe winner is told Probe, every opening and transition is
// reported once, and every call returns within CallTimeout. Each worker has
// its own pool, as a separate process would.
func TestFaultFleet(t *testing.T) {
	p, err := faultproxy.Start(server.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	prefix := uniquePrefix(t)
	observer := isolate(t, newRaw(t), prefix)
	rep, err := faultfleet.Run(t.Context(), faultfleet.Config{
		NewStore: func(context.Context, int) (driver.Store, error) {
			db := newDB(t, server.DSNFor(p.Addr()))
			db.SetMaxOpenConns(2)
			s, err := mysql.New(db, table, mysql.WithEndpoint(p.Addr()))
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { s.Close() })
			return kvbreaker.Prefixed(s, prefix)
		},
		Observer: observer,
		Proxy:    p,
		Short:    testing.Short(),
		Logf:     t.Logf,
	})
	t.Log(rep)
	if err != nil {
		t.Fatalf("%v\nmariadbd pid %d (0: stopped)", err, server.PID())
	}
}
