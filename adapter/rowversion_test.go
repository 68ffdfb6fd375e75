package adapter_test

import (
	"math"
	"testing"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestRowVersionRoundTrip: the parameters RowVersionArgs gives for a
// row's RowVersion are the row's own (a record's version and -1, a foreign
// row's 0 and hash); a foreign row never reads as driver.NoVersion nor as
// a record's version. The control: a record and a foreign row whose hash
// is that record's version read as different versions.
func TestRowVersionRoundTrip(t *testing.T) {
	for _, ver := range []int64{1, 2, 1 << 40, math.MaxInt64} {
		v := adapter.RowVersion(ver, 12345)
		if gv, gh := adapter.RowVersionArgs(v); gv != ver || gh != -1 {
			t.Errorf("record %d: RowVersionArgs(%d) = %d, %d; want %d, -1", ver, v, gv, gh, ver)
		}
	}
	for _, ver := range []int64{0, -1, math.MinInt64} {
		for _, hash := range []int64{0, 1, 1<<60 - 1, math.MaxInt64} {
			v := adapter.RowVersion(ver, hash)
			if v == driver.NoVersion {
				t.Errorf("foreign row (%d, %d) reads as driver.NoVersion", ver, hash)
			}
			if gv, gh := adapter.RowVersionArgs(v); gv != 0 || gh != hash {
				t.Errorf("foreign row (%d, %d): RowVersionArgs(%d) = %d, %d; want 0, %d", ver, hash, v, gv, gh, hash)
			}
			if record := adapter.RowVersion(hash, 0); hash > 0 && record == v {
				t.Errorf("foreign row of hash %d and the record of version %d both read as %d", hash, hash, v)
			}
		}
	}
}
