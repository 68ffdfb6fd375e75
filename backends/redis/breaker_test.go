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

// runFleet drives 64 workers through a circuit's life on each host in
// turn, 64 calls at a time (fleettest.Cycle).
func runFleet(t *testing.T, client func() goredis.UniversalClient, hosts ...string) {
	f := newFleet(t, 64, client, kvbreaker.Settings{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: 10 * time.Minute})
	for _, host := range hosts {
		f.Cycle(t, host, len(f.Breakers))
	}
}

func TestBreakerFleet(t *testing.T) {
	runFleet(t, func() goredis.UniversalClient { return newClient(t, srv.Addr()) }, "inbox.example", "mx.example")
}
