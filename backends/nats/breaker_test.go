package nats_test

import (
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/fleettest"
)

// TestBreakerFleetOverNATS: 64 workers, each with a connection and Store
// of its own, through a circuit's life with 64 calls at a time
// (fleettest.Cycle): one closed→open, one probe per restraint.
func TestBreakerFleetOverNATS(t *testing.T) {
	prefix := uniquePrefix(t)
	var stores []driver.Store
	for range 64 {
		stores = append(stores, newStoreUnder(t, prefix))
	}
	fleettest.New(t, stores, kvbreaker.Settings{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: 10 * time.Minute}).
		Cycle(t, "inbox.example", 64)
}
