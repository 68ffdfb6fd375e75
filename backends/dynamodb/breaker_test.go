package dynamodb_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/fleettest"
)

// newFleet is a fleettest.Fleet of workers, each over its own Store (as
// separate worker processes would have), sharing one table and one key
// prefix. The fleet's clock starts at start and the stores read it too:
// dynalite judges no time itself, so only the workers' clocks matter.
func newFleet(t *testing.T, workers int, start time.Time, s kvbreaker.Settings) *fleettest.Fleet {
	t.Helper()
	clk := &fleettest.Clock{}
	clk.Set(start)
	prefix := uniquePrefix(t)
	stores := make([]driver.Store, workers)
	for i := range stores {
		stores[i] = newPrefixed(t, client, prefix, dynamodb.WithClock(clk.Now))
	}
	return fleettest.NewOn(t, clk, stores, s)
}

// TestBreakerFleet drives four Breakers over one dynalite table through a
// whole cycle with 16 goroutines at each step, on the fleet's clock.
func TestBreakerFleet(t *testing.T) {
	const host, workers, goroutines = "inbox.example", 4, 16
	ctx := t.Context()
	f := newFleet(t, workers, time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), kvbreaker.Settings{
		FailureThreshold: 3,
		FailureWindow:    time.Minute,
		RecoveryDelay:    30 * time.Second,
	})

	// closed: everyone sends.
	if got, _ := f.AllowAll(t, host, goroutines); got[kvbreaker.Send] != goroutines {
		t.Fatalf("closed: decisions %v, want %d sends", got, goroutines)
	}
	// 16 goroutines fail at once: the circuit opens exactly once.
	f.Concurrently(goroutines, func(_ int, b *kvbreaker.Breaker) {
		if err := b.Failure(ctx, host); err != nil {
			t.Errorf("Failure: %v", err)
		}
	})
	f.Tr.Want(t, map[string]int{"closed→open": 1})
	st, err := f.Breakers[0].Inspect(ctx, host)
	if err != nil || st.State != kvbreaker.StateOpen || len(st.Failures) != 3 {
		t.Fatalf("after failures: %+v, %v", st, err)
	}
	opened := st.RestrainedUntil

	// open: everyone holds until the restraint ends.
	for i, b := range f.Breakers {
		v, err := b.Allow(ctx, host, time.Time{})
		if err != nil || v.Decision != kvbreaker.Hold || !v.RetryAt.Equal(opened) {
			t.Fatalf("worker %d while open: %+v, %v; want hold until %v", i, v, err, opened)
		}
	}
	// Failures while open write nothing.
	if err := f.Breakers[1].Failure(ctx, host); err != nil {
		t.Fatal(err)
	}
	if st2, _ := f.Breakers[2].Inspect(ctx, host); st2.Version != st.Version {
		t.Fatalf("a failure while open rewrote the record (version %d → %d)", st.Version, st2.Version)
	}
	f.Tr.Want(t, map[string]int{})

	// Recovery delay passes: exactly one probe is elected fleet-wide.
	f.Clock.Set(opened)
	if got, _ := f.AllowAll(t, host, goroutines); got[kvbreaker.Probe] != 1 || got[kvbreaker.Hold] != goroutines-1 || got[kvbreaker.Send] != 0 {
		t.Fatalf("half-open election: decisions %v, want 1 probe and %d holds", got, goroutines-1)
	}
	f.Tr.Want(t, map[string]int{"open→half-open": 1})
	// The probe fails (reported by any worker): one strike reopens.
	if err := f.Breakers[3].Failure(ctx, host); err != nil {
		t.Fatal(err)
	}
	f.Tr.Want(t, map[string]int{"half-open→open": 1})
	if got, _ := f.AllowAll(t, host, goroutines); got[kvbreaker.Hold] != goroutines {
		t.Fatalf("reopened: decisions %v, want %d holds", got, goroutines)
	}

	// Next probe succeeds: the circuit closes and the record is gone.
	f.Clock.Advance(30 * time.Second)
	if got, _ := f.AllowAll(t, host, goroutines); got[kvbreaker.Probe] != 1 {
		t.Fatalf("second election: decisions %v, want 1 probe", got)
	}
	f.Tr.Want(t, map[string]int{"open→half-open": 1})
	if err := f.Breakers[0].Success(ctx, host); err != nil {
		t.Fatal(err)
	}
	f.Tr.Want(t, map[string]int{"half-open→closed": 1})
	if st, err := f.Breakers[1].Inspect(ctx, host); err != nil || st.Found {
		t.Fatalf("after success: %+v, %v; want no record", st, err)
	}
	if got, _ := f.AllowAll(t, host, goroutines); got[kvbreaker.Send] != goroutines {
		t.Fatalf("closed again: decisions %v, want %d sends", got, goroutines)
	}
}

// TestBreakerRecordOutlivesRecovery checks the derived StateTTL against the
// store's expiry: the open record is still there when the probe is due, and
// gone once it can no longer matter.
func TestBreakerRecordOutlivesRecovery(t *testing.T) {
	const host = "slow.example"
	ctx := t.Context()
	f := newFleet(t, 2, time.Date(2026, 11, 30, 9, 0, 0, 123_000_000, time.UTC),
		kvbreaker.Settings{FailureThreshold: 1, FailureWindow: 10 * time.Second, RecoveryDelay: 20 * time.Second})
	bs := f.Breakers
	if err := bs[0].Failure(ctx, host); err != nil {
		t.Fatal(err)
	}
	ttl := bs[0].StateTTL()
	if want := 20*time.Second + kvbreaker.DefaultTTLMargin; ttl != want {
		t.Fatalf("StateTTL = %v, want %v", ttl, want)
	}
	f.Clock.Advance(20 * time.Second) // the probe is due: the record must be there
	if v, err := bs[1].Allow(ctx, host, time.Time{}); err != nil || v.Decision != kvbreaker.Probe {
		t.Fatalf("at the recovery instant: %+v, %v; want probe", v, err)
	}
	// The probe rewrote the record at +20s; it lives until ceil(+20s+ttl).
	f.Clock.Advance(ttl + time.Second)
	if st, err := bs[0].Inspect(ctx, host); err != nil || st.Found {
		t.Fatalf("after the record's TTL: %+v, %v; want it expired", st, err)
	}
}

// TestBreakerRefusesSkewBeyondPurgeDelay: the purge delay is the clock skew
// the store's physical expiry covers (Traits), and kvbreaker.New holds
// Settings.ClockSkew to it: with no MaxClockSkew declared, a 1 s purge
// delay would take any ClockSkew, and the physical TTL could delete a
// record a reader behind by more than 1 s still counts as live.
func TestBreakerRefusesSkewBeyondPurgeDelay(t *testing.T) {
	for _, tc := range []struct {
		name    string
		purge   time.Duration
		skew    time.Duration
		refused bool
	}{
		{"skew-above-purge-delay", time.Second, 2 * time.Second, true},
		{"skew-above-rounded-purge-delay", 1500 * time.Millisecond, 2*time.Second + time.Millisecond, true},
		// Controls: the check can pass.
		{"skew-equal-to-purge-delay", time.Second, time.Second, false},
		{"skew-within-rounded-purge-delay", 1500 * time.Millisecond, 2 * time.Second, false},
		{"default-purge-delay", 0, time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []dynamodb.Option
			if tc.purge > 0 {
				opts = append(opts, dynamodb.WithPurgeDelay(tc.purge))
			}
			_, err := kvbreaker.New(newStore(t, opts...), kvbreaker.Settings{ClockSkew: tc.skew})
			switch {
			case tc.refused && err == nil:
				t.Fatalf("ClockSkew %v over a %v purge delay was accepted", tc.skew, tc.purge)
			case tc.refused && !strings.Contains(err.Error(), "dynamodb.WithPurgeDelay"):
				t.Fatalf("the refusal does not name the option to raise: %v", err)
			case !tc.refused && err != nil:
				t.Fatalf("ClockSkew %v over a %v purge delay refused: %v", tc.skew, tc.purge, err)
			}
		})
	}
}
