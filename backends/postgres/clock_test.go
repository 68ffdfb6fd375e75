package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/driver"
)

// clockSlack is what the bounds allow beyond resolution: the server runs on
// this machine and reads the same clock, so its reading happens between
// before and after; the slack covers only the two clock-reading paths.
const clockSlack = time.Millisecond

// sampleWithin samples st's clock and fails t unless the sample lies in
// [before-resolution-clockSlack, after+clockSlack] of this machine's clock.
func sampleWithin(t *testing.T, st driver.ClockSampler) {
	t.Helper()
	before := time.Now()
	got, res, err := st.SampleClock(t.Context())
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if res != time.Microsecond {
		t.Errorf("resolution = %v, want 1µs (timestamptz)", res)
	}
	if lo, hi := before.Add(-res-clockSlack), after.Add(clockSlack); got.Before(lo) || got.After(hi) {
		t.Errorf("server clock %v outside [%v, %v] (offset from before %v, round trip %v)",
			got, lo, hi, got.Sub(before), after.Sub(before))
	}
}

// TestSampleClock: clock_timestamp() on a server of this machine reads this
// machine's clock within the round trip, and each sample is read anew
// (strictly later than the one before).
func TestSampleClock(t *testing.T) {
	st := newRaw(t)
	var prev time.Time
	for range 20 {
		sampleWithin(t, st)
		got, _, err := st.SampleClock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !got.After(prev) {
			t.Errorf("sample %v not after the previous %v", got, prev)
		}
		prev = got
	}
}

// TestSampleClockErrors: a canceled context, a paused and a killed server
// each give a postgres *driver.OpError, never a time; the same store
// samples again once the server resumes.
func TestSampleClockErrors(t *testing.T) {
	check := func(what string, err error, cause error, says string) {
		t.Helper()
		var oe *driver.OpError
		if !errors.As(err, &oe) || oe.Backend != "postgres" || oe.Op != "sample clock" {
			t.Errorf("%s: err = %v, want a postgres sample clock *driver.OpError", what, err)
		}
		if !errors.Is(err, cause) || !strings.Contains(fmtErr(err), says) {
			t.Errorf("%s: err = %v, want it to match %v and say %q", what, err, cause, says)
		}
		t.Logf("%s: %v", what, err)
	}
	sample := func(ctx context.Context, st *postgres.Store) error {
		got, res, err := st.SampleClock(ctx)
		if err != nil && (!got.IsZero() || res != 0) {
			t.Errorf("SampleClock = %v, %v with error %v; want zero values", got, res, err)
		}
		return err
	}

	srv := ownServer(t)
	st := mustNew(t, srv.URL())
	sampleWithin(t, st) // negative control: the same store answers while the server runs

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	check("canceled", sample(ctx, st), context.Canceled, "no answer from postgres at "+srv.Addr())

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = srv.Resume()
		}
	}()
	ctx, cancel = context.WithTimeout(t.Context(), 300*time.Millisecond)
	start := time.Now()
	err := sample(ctx, st)
	cancel()
	// The server stays paused until the call returns, so returning with
	// DeadlineExceeded (checked below) proves the context was honoured;
	// how soon is the machine's load, so the bound only catches a hang.
	if d := time.Since(start); d > hangGuard {
		t.Errorf("paused: SampleClock took %v with a 300 ms context", d)
	}
	check("paused", err, context.DeadlineExceeded, "no answer from postgres at "+srv.Addr())
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	sampleWithin(t, st)

	srv.Kill()
	check("killed", sample(t.Context(), st), driver.ErrUnreachable, "cannot reach postgres at "+srv.Addr())
}

func fmtErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// hangGuard bounds a call that should end with its context: far past any
// delay a loaded machine adds, short of waiting for the paused server.
const hangGuard = 30 * time.Second
