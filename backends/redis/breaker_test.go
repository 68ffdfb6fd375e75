package redis_test

import (
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/fleettest"
)

// fleet is a fleettest.Fleet of workers, each with its own client (as
// separate processes would have), sharing one key prefix.
type fleet struct{ *fleettest.Fleet }

func newFleet(t *testing.T, workers int, client func() goredis.UniversalClient, s kvbreaker.Settings) *fleet {
	t.Helper()
	prefix := uniquePrefix(t)
	var stores []driver.Store
	for range workers {
		stores = append(stores, newStoreUnder(t, client(), prefix))
	}
	return &fleet{fleettest.New(t, stores, s)}
}

// runFleet drives 64 workers through a circuit's life on each host: all
// fail at once (exactly one closed→open), hold, one probe per restraint
// (fails: reopens; again: succeeds, closes).
func runFleet(t *testing.T, client func() goredis.UniversalClient, hosts ...string) {
	const (
		workers  = 64
		recovery = 10 * time.Minute
	)
	f := newFleet(t, workers, client, kvbreaker.Settings{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: recovery})
	ctx := t.Context()
	for _, host := range hosts {
		if got, _ := f.AllowAll(t, host, len(f.Breakers)); got[kvbreaker.Send] != workers {
			t.Fatalf("%s: closed circuit decisions %v, want %d sends", host, got, workers)
		}
		f.Concurrently(len(f.Breakers), func(_ int, b *kvbreaker.Breaker) {
			if err := b.Failure(ctx, host); err != nil {
				t.Errorf("Failure: %v", err)
			}
		})
		f.Tr.Want(t, map[string]int{"closed→open": 1})
		if got, _ := f.AllowAll(t, host, len(f.Breakers)); got[kvbreaker.Hold] != workers {
			t.Fatalf("%s: open circuit decisions %v, want %d holds", host, got, workers)
		}
	}
	f.Clock.Advance(recovery + time.Second)
	for _, host := range hosts {
		got, prober := f.AllowAll(t, host, len(f.Breakers))
		if got[kvbreaker.Probe] != 1 || got[kvbreaker.Hold] != workers-1 {
			t.Fatalf("%s: after the recovery delay decisions %v, want 1 probe and %d holds", host, got, workers-1)
		}
		f.Tr.Want(t, map[string]int{"open→half-open": 1})
		if err := prober.Failure(ctx, host); err != nil {
			t.Fatal(err)
		}
		f.Tr.Want(t, map[string]int{"half-open→open": 1})
	}
	f.Clock.Advance(recovery + time.Second)
	for _, host := range hosts {
		got, prober := f.AllowAll(t, host, len(f.Breakers))
		if got[kvbreaker.Probe] != 1 || got[kvbreaker.Hold] != workers-1 {
			t.Fatalf("%s: second probe round decisions %v, want 1 probe", host, got)
		}
		f.Tr.Want(t, map[string]int{"open→half-open": 1})
		if err := prober.Success(ctx, host); err != nil {
			t.Fatal(err)
		}
		f.Tr.Want(t, map[string]int{"half-open→closed": 1})
		if got, _ := f.AllowAll(t, host, len(f.Breakers)); got[kvbreaker.Send] != workers {
			t.Errorf("%s: closed again: decisions %v, want all sends", host, got)
		}
	}
}

func TestBreakerFleet(t *testing.T) {
	runFleet(t, func() goredis.UniversalClient { return newClient(t, srv.Addr()) }, "inbox.example", "mx.example")
}
