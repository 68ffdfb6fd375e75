package etcd_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/fleettest"
)

// fleet is a fleettest.Fleet whose workers each have their own etcd
// client and Store, sharing one key prefix.
type fleet struct {
	*fleettest.Fleet
	stores []*testStore
}

func newFleet(t *testing.T, workers int, s kvbreaker.Settings) *fleet {
	t.Helper()
	f := &fleet{}
	prefix := uniquePrefix(t)
	var stores []driver.Store
	for range workers {
		st := newStoreUnder(t, prefix)
		f.stores = append(f.stores, st)
		stores = append(stores, st)
	}
	f.Fleet = fleettest.New(t, stores, s)
	return f
}

// TestBreakerFleetOverEtcd: 4 workers, each with its own client, through
// a circuit's life with 24 calls at a time (fleettest.Cycle).
func TestBreakerFleetOverEtcd(t *testing.T) {
	newFleet(t, 4, kvbreaker.Settings{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: 10 * time.Minute}).
		Cycle(t, "inbox.example", 24)
}

// TestBreakerManyHostsGrants runs a fleet's failures over 500 hosts and
// reports the lease grants per 1,000 writes.
func TestBreakerManyHostsGrants(t *testing.T) {
	f := newFleet(t, 4, kvbreaker.Settings{FailureThreshold: 2})
	const hosts = 500
	f.Concurrently(16, func(i int, b *kvbreaker.Breaker) {
		for h := i; h < hosts; h += 16 {
			for range 2 { // two failures open the circuit
				if err := b.Failure(t.Context(), fmt.Sprintf("h%d.example", h)); err != nil {
					t.Error(err)
					return
				}
			}
		}
	})
	f.Tr.Want(t, map[string]int{"closed→open": hosts})
	var sum etcd.Stats
	for _, s := range f.stores {
		st := s.Stats()
		sum.Writes += st.Writes
		sum.Grants += st.Grants
	}
	t.Logf("%d workers, %d hosts: %d writes, %d grants: %.1f grants per 1,000 writes",
		len(f.stores), hosts, sum.Writes, sum.Grants, sum.GrantsPer1000Writes())
	// One grant per worker: the default TTL's 60 s slack outlasts the test.
	if sum.Writes != 2*hosts || sum.Grants != uint64(len(f.stores)) {
		t.Errorf("%d writes and %d grants, want %d writes and %d grants", sum.Writes, sum.Grants, 2*hosts, len(f.stores))
	}
}
