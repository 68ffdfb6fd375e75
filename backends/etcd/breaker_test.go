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

func TestBreakerFleetOverEtcd(t *testing.T) {
	const (
		workers   = 4
		callers   = 24 // goroutines per phase, spread over the workers
		host      = "inbox.example"
		recovery  = 10 * time.Minute
		threshold = 3
	)
	f := newFleet(t, workers, kvbreaker.Settings{FailureThreshold: threshold, FailureWindow: time.Minute, RecoveryDelay: recovery})
	ctx := t.Context()

	// Closed: everyone sends, nothing is written.
	if got, _ := f.AllowAll(t, host, callers); got[kvbreaker.Send] != callers {
		t.Fatalf("closed circuit decisions %v, want %d sends", got, callers)
	}

	// 24 goroutines fail at once: exactly one closed→open, no errors.
	f.Concurrently(callers, func(_ int, b *kvbreaker.Breaker) {
		if err := b.Failure(ctx, host); err != nil {
			t.Errorf("Failure: %v", err)
		}
	})
	f.Tr.Want(t, map[string]int{"closed→open": 1})
	st, err := f.Breakers[0].Inspect(ctx, host)
	if err != nil || !st.Found || st.State != kvbreaker.StateOpen {
		t.Fatalf("after the failures Inspect = %+v, %v; want open", st, err)
	}
	opened := st.RestrainedUntil.Add(-recovery)

	// Open: every worker holds until the recovery delay has passed.
	for i, b := range f.Breakers {
		v, err := b.Allow(ctx, host, time.Time{})
		if err != nil || v.Decision != kvbreaker.Hold || !v.RetryAt.Equal(opened.Add(recovery)) {
			t.Errorf("worker %d on an open circuit: %+v, %v; want hold until %v", i, v, err, opened.Add(recovery))
		}
	}
	// Failures while open write nothing.
	before := f.stores[0].Stats().Writes
	if err := f.Breakers[0].Failure(ctx, host); err != nil {
		t.Fatal(err)
	}
	if w := f.stores[0].Stats().Writes; w != before {
		t.Errorf("a failure on an open circuit wrote %d times", w-before)
	}
	f.Tr.Want(t, map[string]int{})

	// Recovery delay passes: of 24 concurrent asks, exactly one probes.
	f.Clock.Advance(recovery + time.Second)
	got, prober := f.AllowAll(t, host, callers)
	if got[kvbreaker.Probe] != 1 || got[kvbreaker.Hold] != callers-1 {
		t.Fatalf("after the recovery delay decisions %v, want 1 probe and %d holds", got, callers-1)
	}
	f.Tr.Want(t, map[string]int{"open→half-open": 1})

	// The probe fails: a single strike reopens.
	if err := prober.Failure(ctx, host); err != nil {
		t.Fatal(err)
	}
	f.Tr.Want(t, map[string]int{"half-open→open": 1})

	// Again after the delay: one probe; it succeeds and the circuit closes.
	f.Clock.Advance(recovery + time.Second)
	got, prober = f.AllowAll(t, host, callers)
	if got[kvbreaker.Probe] != 1 || got[kvbreaker.Hold] != callers-1 {
		t.Fatalf("second probe round decisions %v, want 1 probe", got)
	}
	f.Tr.Want(t, map[string]int{"open→half-open": 1})
	// While the probe is out, others hold and re-check at the release
	// interval.
	v, err := f.Breakers[1].Allow(ctx, host, time.Time{})
	if err != nil || v.Decision != kvbreaker.Hold || !v.RetryAt.Equal(f.Clock.Now().Add(kvbreaker.DefaultReleaseInterval)) {
		t.Errorf("half-open Allow = %+v, %v; want hold for the release interval", v, err)
	}
	if err := prober.Success(ctx, host); err != nil {
		t.Fatal(err)
	}
	f.Tr.Want(t, map[string]int{"half-open→closed": 1})
	if st, err := f.Breakers[2].Inspect(ctx, host); err != nil || st.Found {
		t.Errorf("after success Inspect = %+v, %v; want no record", st, err)
	}
	if got, _ := f.AllowAll(t, host, callers); got[kvbreaker.Send] != callers {
		t.Errorf("closed again: decisions %v, want all sends", got)
	}
	// Successes on a closed circuit write nothing.
	f.Concurrently(callers, func(_ int, b *kvbreaker.Breaker) {
		if err := b.Success(ctx, host); err != nil {
			t.Errorf("Success: %v", err)
		}
	})
	f.Tr.Want(t, map[string]int{})
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
