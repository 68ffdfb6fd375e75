package kvbreaker

import (
	"testing"
	"time"
)

// TestWallIsTruncate: wall is the instant without its monotonic reading,
// truncated to the millisecond, in the same location: equal (==) to what
// Truncate gives, on either side of 1970 and of year 1 (where Time keeps
// negative seconds), and at a millisecond's edges.
func TestWallIsTruncate(t *testing.T) {
	now := time.Now()
	cet := time.FixedZone("CET", 3600)
	var ts []time.Time
	for _, base := range []time.Time{
		now, now.UTC(), now.In(cet),
		time.Unix(0, 0), time.Unix(0, 1), time.Unix(1, 999_999_999), time.Unix(-1, 999_999_999), time.Unix(-1, 1),
		time.Date(1969, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 1_500_000, time.UTC),
		time.Date(0, 12, 31, 23, 59, 59, 123_456_789, time.UTC),
		time.Date(-5, 6, 1, 0, 0, 0, 999_999, cet),
		time.Date(2262, 1, 1, 0, 0, 0, 1, time.UTC),
		{},
	} {
		for _, d := range []time.Duration{0, 1, 999_999, 1_000_000, 1_000_001, 123_456_789, -1, -1_000_001} {
			ts = append(ts, base.Add(d))
		}
	}
	for _, tm := range ts {
		want := tm.Round(0).Truncate(time.Millisecond)
		if got := wall(tm); got != want {
			t.Errorf("wall(%v) = %v, want %v", tm, got, want)
		}
	}
}
