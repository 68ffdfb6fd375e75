package fleettest

import (
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
)

// EndToEnd is what a test of a store reached another way (over TLS, as
// a limited user) asks of it: through stores (each on a connection of its
// own, all under one empty prefix) a create of a.example, a read of it
// and a listing of that one key, then a fleet of Breakers over them
// running a circuit's life on each of hosts. The listing needs stores[0]
// to be a driver.Lister.
func EndToEnd(t *testing.T, stores []driver.Store, hosts ...string) {
	t.Helper()
	ctx := t.Context()
	s := stores[0]
	v, err := s.CompareAndSwap(ctx, "a.example", driver.NoVersion, []byte("x"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got, cur, err := s.Get(ctx, "a.example"); err != nil || cur != v || string(got) != "x" {
		t.Fatalf("Get = %q, version %d, %v; want \"x\", version %d", got, cur, err, v)
	}
	l, ok := s.(driver.Lister)
	if !ok {
		t.Fatalf("%T is not a driver.Lister", s)
	}
	if keys, _, err := l.List(ctx, "", "", 10); err != nil || len(keys) != 1 {
		t.Fatalf("List = %q, %v; want the one key", keys, err)
	}
	f := New(t, stores, kvbreaker.Settings{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: 10 * time.Minute})
	for _, h := range hosts {
		f.Cycle(t, h, len(stores))
	}
}
