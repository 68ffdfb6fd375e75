package adapter

import (
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// TestCeilSeconds: never below d (a key never expires early), less than a
// second above it, and at least 1 (0 means no TTL to such stores).
func TestCeilSeconds(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, 0, 1, time.Millisecond, time.Second - 1, time.Second, time.Second + 1, 90 * time.Second, 90*time.Second + time.Nanosecond} {
		got := CeilSeconds(d)
		if got < 1 || time.Duration(got)*time.Second < d || d > 0 && time.Duration(got)*time.Second-d >= time.Second {
			t.Errorf("CeilSeconds(%v) = %d: want the least whole seconds, at least 1, not below it", d, got)
		}
	}
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{time.Nanosecond, 1}, {time.Second, 1}, {time.Second + 1, 2},
		{1500 * time.Millisecond, 2}, {30*time.Minute + 5*time.Second, 1805}, {-time.Second, 1},
	} {
		if got := CeilSeconds(tc.d); got != tc.want {
			t.Errorf("CeilSeconds(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

// TestRowExpiry: a negative count is no expiry; the rest are microseconds.
func TestRowExpiry(t *testing.T) {
	for _, c := range []struct {
		us   int64
		want time.Duration
	}{{-1, driver.NoExpiry}, {-1 << 40, driver.NoExpiry}, {0, 0}, {1, time.Microsecond}, {1_500_000, 1500 * time.Millisecond}} {
		if got := RowExpiry(c.us); got != c.want {
			t.Errorf("RowExpiry(%d) = %v, want %v", c.us, got, c.want)
		}
	}
}
