package etcd_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestBreakerOverForeignValue: over each value another process puts
// without a lease, FailureThreshold failures open the circuit, the
// Breaker's record carries a lease (Expiry reads it), and Reset works.
func TestBreakerOverForeignValue(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	b, err := kvbreaker.New(s, kvbreaker.Settings{
		FailureThreshold: 3,
		FailureWindow:    time.Minute,
		RecoveryDelay:    time.Minute,
		SkipClockCheck:   true,
		Logger:           slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.WithoutCancel(ctx))
	er := s.Store.(driver.ExpiryReader)
	for _, shape := range (&harness{}).ForeignShapes() {
		t.Run(strings.ReplaceAll(shape, " ", "-"), func(t *testing.T) {
			host := strings.ReplaceAll(shape, " ", "-") + ".example"
			if err := plantForeign(ctx, s.Client(), s.prefix+host, shape); err != nil {
				t.Fatal(err)
			}
			if d, err := er.Expiry(ctx, host); err != nil || d != driver.NoExpiry {
				t.Fatalf("Expiry of a key put without a lease = %v, %v; want driver.NoExpiry", d, err)
			}
			for i := range 3 {
				if err := b.Failure(ctx, host); err != nil {
					t.Fatalf("Failure #%d over the foreign value = %v", i+1, err)
				}
			}
			if v, err := b.Allow(ctx, host, time.Time{}); err != nil || v.Decision != kvbreaker.Hold {
				t.Fatalf("after 3 failures (threshold 3), Allow = %v, %v; want Hold", v.Decision, err)
			}
			if d, err := er.Expiry(ctx, host); err != nil || d == driver.NoExpiry || d <= 0 {
				t.Fatalf("Expiry of the Breaker's record = %v, %v; want its lease's TTL", d, err)
			}
			if err := b.Reset(ctx, host); err != nil {
				t.Fatalf("Reset = %v", err)
			}
			if v, err := b.Allow(ctx, host, time.Time{}); err != nil || v.Decision != kvbreaker.Send {
				t.Fatalf("after Reset, Allow = %v, %v; want Send", v.Decision, err)
			}
		})
	}
}

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
