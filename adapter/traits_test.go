package adapter

import (
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// TestServerExpiryTraits: each duration lands in the field of its name
// (three different values, so a swap shows), beside atomic compares and
// relative expiry; nothing else is declared (never early, reads not stale,
// not in process, no skew bound).
func TestServerExpiryTraits(t *testing.T) {
	got := ServerExpiry{Granularity: time.Second, MinTTL: 2 * time.Second, Late: 1500 * time.Millisecond}.Traits()
	want := driver.Traits{Atomic: true, Expiry: driver.ExpiryModel{
		Kind: driver.ExpiryRelative, Granularity: time.Second, MinTTL: 2 * time.Second, Late: 1500 * time.Millisecond,
	}}
	if got != want {
		t.Errorf("Traits() = %+v, want %+v", got, want)
	}
	if zero := (ServerExpiry{}).Traits(); zero != (driver.Traits{Atomic: true, Expiry: driver.ExpiryModel{Kind: driver.ExpiryRelative}}) {
		t.Errorf("an exact store's Traits() = %+v: want atomic and relative, nothing more", zero)
	}
}

// TestRowTraits: microseconds, on the server's clock, never early nor
// late; the margin a fleet needs is twice its skew plus the microsecond
// rounded up to the millisecond records keep time in.
func TestRowTraits(t *testing.T) {
	got := RowTraits()
	if got != (ServerExpiry{Granularity: time.Microsecond}).Traits() {
		t.Errorf("RowTraits() = %+v: want ServerExpiry{Granularity: time.Microsecond}", got)
	}
	if m := got.Expiry.RequiredMargin(time.Second); m != 2*time.Second+time.Millisecond {
		t.Errorf("RequiredMargin(1s) = %v, want 2.001s", m)
	}
}
