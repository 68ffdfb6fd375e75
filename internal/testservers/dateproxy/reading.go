package dateproxy

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Sampler reads a server's clock: a driver.ClockSampler's SampleClock
// method value (this package imports nothing of ours).
type Sampler func(context.Context) (time.Time, time.Duration, error)

// Reading is one timed read of a server's clock: this machine's clock
// before and after the call, and what the server said, with its resolution.
type Reading struct {
	Before, After time.Time
	Server        time.Time
	Res           time.Duration
}

// Read times one call of sample on this machine's clock. An error fails tb,
// and so does a resolution other than an HTTP Date's second.
func Read(tb testing.TB, sample Sampler) Reading {
	tb.Helper()
	var r Reading
	var err error
	r.Before = time.Now()
	r.Server, r.Res, err = sample(tb.Context())
	r.After = time.Now()
	if err != nil {
		tb.Fatal(err)
	}
	if r.Res != time.Second {
		tb.Errorf("resolution = %v, want 1s (HTTP Date)", r.Res)
	}
	return r
}

// Outside says why r is not what a server whose clock is offset ahead of
// this machine's would give, or "" when it is: the server's true reading
// lies in [Server, Server+Res), and when it read its clock this machine
// read something in [Before, After]. slack covers only the clock-reading
// paths (a server on this machine stamps Date from the same clock).
func (r Reading) Outside(offset, slack time.Duration) string {
	lo, hi := r.Before.Add(offset-r.Res-slack), r.After.Add(offset+slack)
	if r.Server.Before(lo) || r.Server.After(hi) {
		return fmt.Sprintf("server clock %v outside [%v, %v] for offset %v (sample - before = %v, round trip %v)",
			r.Server, lo, hi, offset, r.Server.Sub(r.Before), r.After.Sub(r.Before))
	}
	return ""
}

// Check fails tb unless r fits offset and does not fit control: bounds
// that a reading at control also passes would prove nothing.
func (r Reading) Check(tb testing.TB, offset, control, slack time.Duration) {
	tb.Helper()
	if why := r.Outside(offset, slack); why != "" {
		tb.Error(why)
	}
	if r.Outside(control, slack) == "" {
		tb.Errorf("a reading for offset %v passes the bounds for %v too", offset, control)
	}
	// What one sample alone estimates: the midpoints of the server's
	// interval and this machine's.
	est := r.Server.Add(r.Res / 2).Sub(r.Before.Add(r.After.Sub(r.Before) / 2))
	tb.Logf("offset %v: one sample estimates %v (± %v)", offset, est, (r.Res+r.After.Sub(r.Before))/2)
}

// BadDates are Date headers a sampler must refuse, never reading a zero
// time from them; "" is an answer without Date.
var BadDates = []struct{ Name, Date string }{
	{"missing", ""},
	{"garbage", "the day after tomorrow"},
	{"unix seconds", "1767225600"},
}
