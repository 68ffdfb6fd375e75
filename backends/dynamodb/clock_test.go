package dynamodb_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/testservers/dateproxy"
	"github.com/kvbreaker/kvbreaker/testservers/dynalite"
)

// clockSlack is what the bounds allow beyond resolution and the round trip:
// dynalite runs on this machine and stamps Date from the same clock, between
// before and after; the slack covers only the clock-reading paths.
const clockSlack = 5 * time.Millisecond

// offsetOutside says why got, a server reading with resolution res taken
// between before and after on this machine's clock, is not what a server
// clock offset ahead of this one would give: the server's true reading lies
// in [got, got+res), and at the instant it read its clock this machine read
// something in [before, after]. "" when it is.
func offsetOutside(before, after, got time.Time, res, offset time.Duration) string {
	lo, hi := before.Add(offset-res-clockSlack), after.Add(offset+clockSlack)
	if got.Before(lo) || got.After(hi) {
		return fmt.Sprintf("server clock %v outside [%v, %v] for offset %v (sample - before = %v, round trip %v)",
			got, lo, hi, offset, got.Sub(before), after.Sub(before))
	}
	return ""
}

// sample times one SampleClock call on this machine's clock.
func sample(t *testing.T, st driver.ClockSampler) (before, after, got time.Time, res time.Duration) {
	t.Helper()
	before = time.Now()
	got, res, err := st.SampleClock(t.Context())
	after = time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if res != time.Second {
		t.Errorf("resolution = %v, want 1s (HTTP Date)", res)
	}
	return before, after, got, res
}

func newClockStore(t *testing.T, endpoint string) *dynamodb.Store {
	t.Helper()
	st, err := dynamodb.New(newClient(endpoint), table)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestSampleClock: dynalite (node's http server) sends a Date header, and
// SampleClock reads this machine's clock from it, truncated to the second,
// within the round trip.
func TestSampleClock(t *testing.T) {
	st := newClockStore(t, srv.Endpoint)
	for range 5 {
		before, after, got, res := sample(t, st)
		if why := offsetOutside(before, after, got, res, 0); why != "" {
			t.Error(why)
		}
		if got.Nanosecond() != 0 {
			t.Errorf("sample %v has a fraction of a second; an HTTP Date has none", got)
		}
	}
}

// TestSampleClockSkewed: behind a proxy that moves dynalite's Date by a
// known offset, SampleClock's reading is off by that offset, within the
// resolution and the round trip; through the same proxy without the
// rewrite (the negative control), it is off by nothing, and the skewed
// bounds then fail.
func TestSampleClockSkewed(t *testing.T) {
	for _, offset := range []time.Duration{7 * time.Second, -90 * time.Second} {
		t.Run(offset.String(), func(t *testing.T) {
			skewed := newClockStore(t, dateproxy.Start(t, srv.Endpoint, dateproxy.Shift(offset)).URL)
			before, after, got, res := sample(t, skewed)
			if why := offsetOutside(before, after, got, res, offset); why != "" {
				t.Error(why)
			}
			if offsetOutside(before, after, got, res, 0) == "" {
				t.Errorf("a sample %v off passes the bounds for no offset", offset)
			}
			// The estimate a Breaker would make: the midpoints of the
			// server's interval and this machine's.
			est := got.Add(res / 2).Sub(before.Add(after.Sub(before) / 2))
			t.Logf("offset %v: estimated %v (± %v)", offset, est, (res+after.Sub(before))/2)

			plain := newClockStore(t, dateproxy.Start(t, srv.Endpoint, dateproxy.Date{}).URL)
			before, after, got, res = sample(t, plain)
			if why := offsetOutside(before, after, got, res, 0); why != "" {
				t.Errorf("control: %s", why)
			}
			if offsetOutside(before, after, got, res, offset) == "" {
				t.Errorf("control: an unshifted sample passes the bounds for offset %v", offset)
			}
		})
	}
}

// TestSampleClockBadDate: an answer without a Date header, or with one that
// is not an HTTP date, is an error that says so, never a zero time.
func TestSampleClockBadDate(t *testing.T) {
	for _, tc := range []struct {
		name, date, says string
	}{
		{"missing", "", "no Date header in the answer"},
		{"garbage", "the day after tomorrow", `unparsable Date header "the day after tomorrow"`},
		{"unix seconds", "1767225600", `unparsable Date header "1767225600"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			endpoint := dateproxy.Start(t, srv.Endpoint, dateproxy.Raw(tc.date)).URL
			got, res, err := newClockStore(t, endpoint).SampleClock(t.Context())
			var oe *driver.OpError
			if !errors.As(err, &oe) || oe.Backend != "dynamodb" || oe.Op != "sample clock" {
				t.Fatalf("SampleClock = %v, %v, %v; want a dynamodb sample clock *driver.OpError", got, res, err)
			}
			if !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), endpoint) {
				t.Errorf("err = %q, want it to say %q and name %s", err, tc.says, endpoint)
			}
			if !got.IsZero() || res != 0 {
				t.Errorf("SampleClock = %v, %v with an error; want zero values", got, res)
			}
			t.Log(err)
		})
	}
}

// TestSampleClockErrors: a canceled context, a paused and a killed dynalite
// each give a dynamodb *driver.OpError saying so; the same store samples
// again once the server resumes.
func TestSampleClockErrors(t *testing.T) {
	own := dynalite.MustStart(t)
	if err := dynamodb.CreateTable(t.Context(), newClient(own.Endpoint), table); err != nil {
		t.Fatal(err)
	}
	st := newClockStore(t, own.Endpoint)
	check := func(what string, err error, cause error, says string) {
		t.Helper()
		var oe *driver.OpError
		if !errors.As(err, &oe) || oe.Backend != "dynamodb" || oe.Op != "sample clock" {
			t.Errorf("%s: err = %v, want a dynamodb sample clock *driver.OpError", what, err)
		} else if !errors.Is(err, cause) || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: err = %v, want it to match %v and say %q", what, err, cause, says)
		}
		t.Logf("%s: %v", what, err)
	}
	sampleErr := func(ctx context.Context) error {
		got, res, err := st.SampleClock(ctx)
		if err != nil && (!got.IsZero() || res != 0) {
			t.Errorf("SampleClock = %v, %v with error %v; want zero values", got, res, err)
		}
		return err
	}
	// Negative control: the same store answers while the server runs.
	if err := sampleErr(t.Context()); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	check("canceled", sampleErr(ctx), context.Canceled, "")

	if err := own.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = own.Resume()
		}
	}()
	ctx, cancel = context.WithTimeout(t.Context(), 300*time.Millisecond)
	start := time.Now()
	err := sampleErr(ctx)
	cancel()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("paused: SampleClock took %v with a 300 ms context", d)
	}
	check("paused", err, context.DeadlineExceeded, "no answer from dynamodb at "+own.Endpoint)
	if err := own.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	if err := sampleErr(t.Context()); err != nil {
		t.Errorf("after Resume: %v", err)
	}

	own.Kill()
	check("killed", sampleErr(t.Context()), dynamodb.ErrUnreachable, "cannot reach dynamodb at "+own.Endpoint+": connection refused")
}
