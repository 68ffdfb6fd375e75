package adapter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestSampleClock: an open store's reading comes back with the resolution
// given; a closed store's call sends nothing and answers ErrClosed, and a
// failed read its error, each in an OpError of op "clock".
func TestSampleClock(t *testing.T) {
	at := time.Date(2026, 12, 3, 12, 0, 0, 123456000, time.UTC)
	errLost := errors.New("connection lost")
	for _, tc := range []struct {
		name    string
		closed  bool
		readErr error
		want    error
		reads   int
	}{
		{"open", false, nil, nil, 1},
		{"closed", true, nil, errClosed, 0},
		{"read fails", false, errLost, errLost, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			closed := tc.closed
			reads := 0
			got, res, err := adapter.SampleClock(t.Context(), gateOver(&closed), time.Microsecond, func(context.Context) (time.Time, error) {
				reads++
				return at, tc.readErr
			})
			if reads != tc.reads {
				t.Errorf("%d reads, want %d", reads, tc.reads)
			}
			if tc.want == nil {
				if err != nil || !got.Equal(at) || res != time.Microsecond {
					t.Fatalf("SampleClock = %v, %v, %v; want %v, 1µs, nil", got, res, err, at)
				}
				return
			}
			var oe *driver.OpError
			if !errors.As(err, &oe) || oe.Op != adapter.OpClock || oe.Key != "" || !errors.Is(err, tc.want) {
				t.Fatalf("SampleClock's error = %#v, want an OpError of op %q around %v", err, adapter.OpClock, tc.want)
			}
			if !got.IsZero() || res != 0 {
				t.Errorf("a failed sample returned %v, %v; want the zero time and 0", got, res)
			}
		})
	}
}
