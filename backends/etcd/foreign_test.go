package etcd_test

import (
	"errors"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// TestExpiry: driver.ExpiryReader through kvbreaker.Prefixed: a written
// key's lease TTL, whole seconds within the TTL and the reuse slack; a key
// put without a lease never expires; absent and deleted keys, and a key
// whose lease was revoked, are ErrNotFound.
func TestExpiry(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	er := s.Store.(driver.ExpiryReader)
	if _, err := er.Expiry(ctx, "absent.example"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("Expiry of an absent key = %v, want ErrNotFound", err)
	}
	ver, err := s.CompareAndSwap(ctx, "written.example", driver.NoVersion, []byte("r"), 30*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	d, err := er.Expiry(ctx, "written.example")
	if err != nil || d < 30*time.Minute-2*time.Second || d > 31*time.Minute+time.Second {
		t.Fatalf("Expiry after a write with TTL 30m = %v, %v; want about 30m (plus at most the 60 s reuse slack)", d, err)
	}
	if _, err := s.Client().Put(ctx, s.prefix+"raw.example", "x"); err != nil {
		t.Fatal(err)
	}
	if d, err := er.Expiry(ctx, "raw.example"); err != nil || d != driver.NoExpiry {
		t.Fatalf("Expiry of a key without a lease = %v, %v; want driver.NoExpiry", d, err)
	}
	if err := s.CompareAndDelete(ctx, "written.example", ver); err != nil {
		t.Fatal(err)
	}
	if _, err := er.Expiry(ctx, "written.example"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("Expiry of a deleted key = %v, want ErrNotFound", err)
	}
	// Through the Store itself, unprefixed.
	if d, err := s.etcd.Expiry(ctx, s.prefix+"raw.example"); err != nil || d != driver.NoExpiry {
		t.Fatalf("Store.Expiry of the full key = %v, %v", d, err)
	}
}
