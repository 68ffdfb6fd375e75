package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/mirrortest"
)

// TestMirrorFleet: eight Breakers with a mirror, each with a pool of its
// own, over one prefix. A circuit one opens reaches every other within
// twice the p99 feed delay measured in the run; then
// pg_terminate_backend ends the odd ones' listening backends and, while
// their feeds are down, another Breaker opens a second circuit: they
// decide from the store meanwhile, and from the mirror again once
// resynchronised, always as the store says.
func TestMirrorFleet(t *testing.T) {
	prefix := uniquePrefix(t)
	run := prefixSeq.Add(1)
	var stores []driver.Store
	var broken []int
	var names []string
	for i := range 8 {
		name := fmt.Sprintf("mirrorfleet-%d-%d", run, i)
		st, err := postgres.New(newPool(t, server.URL()+"&application_name="+name), table)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		stores = append(stores, isolate(t, st, prefix))
		if i%2 == 1 {
			broken, names = append(broken, i), append(names, name)
		}
	}
	f := mirrortest.Start(t, stores, kvbreaker.Settings{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: time.Hour})
	f.Propagate(t, 0, "open.example", 16)
	admin := newPool(t, server.URL())
	t.Log(f.BreakAndChange(t, mirrortest.Break{
		Host:   "meanwhile.example",
		Writer: 0,
		Broken: broken,
		Do: func(ctx context.Context) error {
			for _, name := range names {
				if n, err := terminate(ctx, admin, name); err != nil || n != 1 {
					return fmt.Errorf("terminating %s's listening backend: %d ended, %v", name, n, err)
				}
			}
			return nil
		},
	}))
}
