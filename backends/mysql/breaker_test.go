package mysql_test

import (
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/mysql"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/fleettest"
)

// newFleet is a fleettest.Fleet whose workers each have their own pool and
// Store, sharing one key prefix.
func newFleet(t *testing.T, workers int, s kvbreaker.Settings) *fleettest.Fleet {
	t.Helper()
	prefix := uniquePrefix(t)
	stores := make([]driver.Store, workers)
	for i := range stores {
		stores[i] = isolate(t, newWorkerStore(t), prefix)
	}
	return fleettest.New(t, stores, s)
}

// TestBreakerFleetOverMySQL: 64 workers, each with a pool of its own as a
// separate process would have, share one host's record through a circuit's
// life with 64 calls at a time (fleettest.Cycle): 64 concurrent failures
// open it exactly once, and each restraint elects exactly one probe among
// 64 concurrent asks.
func TestBreakerFleetOverMySQL(t *testing.T) {
	newFleet(t, 64, kvbreaker.Settings{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: 10 * time.Minute}).
		Cycle(t, "inbox.example", 64)
}

// newWorkerStore returns a Store with a small pool of its own (64 of them
// stay within the server's connections).
func newWorkerStore(t *testing.T) *mysql.Store {
	t.Helper()
	db := newDB(t, server.DSN())
	db.SetMaxOpenConns(2)
	s, err := mysql.New(db, table, mysql.WithEndpoint(server.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
