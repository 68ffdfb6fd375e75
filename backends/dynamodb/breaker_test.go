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
// circuit's life with 16 calls at a time (fleettest.Cycle), on the fleet's
// clock.
func TestBreakerFleet(t *testing.T) {
	newFleet(t, 4, time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), kvbreaker.Settings{
		FailureThreshold: 3,
		FailureWindow:    time.Minute,
		RecoveryDelay:    30 * time.Second,
	}).Cycle(t, "inbox.example", 16)
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
	if want := 20*time.Second + 5*time.Second; ttl != want { // RecoveryDelay + the default TTLMargin
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
