package dynamodb_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/testservers/dateproxy"
	"github.com/kvbreaker/kvbreaker/internal/testservers/dynalite"
)

// clockSlack is what the bounds allow beyond resolution and the round trip:
// dynalite runs on this machine and stamps Date from the same clock, between
// before and after; the slack covers only the clock-reading paths.
const clockSlack = 5 * time.Millisecond

func newClockStore(t *testing.T, endpoint string) *dynamodb.Store {
	t.Helper()
	st, err := dynamodb.New(newClient(endpoint), table)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestSampleClock: SampleClock reads the clock from an answer's Date,
// truncated to the second, within the round trip. The Date is stamped by a
// proxy from this machine's clock as the answer passes it: dynalite's own
// (node's http server) is a cached string that a timer refreshes each
// second, and on a loaded machine that timer runs late, so node's Date lags
// the clock by the event loop's delay (a test that trusted it failed). Node's
// own Date is read too, for its format: whole seconds, within a minute.
func TestSampleClock(t *testing.T) {
	st := newClockStore(t, dateproxy.Start(t, srv.Endpoint, dateproxy.Stamp(0)).URL)
	for range 5 {
		r := dateproxy.Read(t, st.SampleClock)
		if why := r.Outside(0, clockSlack); why != "" {
			t.Error(why)
		}
	}
	direct := newClockStore(t, srv.Endpoint)
	for range 2 {
		got, _, err := direct.SampleClock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got.Nanosecond() != 0 {
			t.Errorf("sample %v has a fraction of a second; an HTTP Date has none", got)
		}
		if d := time.Since(got); d < -time.Minute || d > time.Minute {
			t.Errorf("dynalite's Date %v is %v from this machine's clock", got, d)
		}
	}
}

// TestSampleClockSkewed: behind a proxy that stamps a Date off by a known
// offset, SampleClock's reading is off by that offset, within the
// resolution and the round trip, and not by none; through the same kind of
// proxy stamping the true time (the negative control), by none and not by
// the offset. (Stamped, not dynalite's shifted: see TestSampleClock.)
func TestSampleClockSkewed(t *testing.T) {
	for _, offset := range []time.Duration{7 * time.Second, -90 * time.Second} {
		t.Run(offset.String(), func(t *testing.T) {
			skewed := newClockStore(t, dateproxy.Start(t, srv.Endpoint, dateproxy.Stamp(offset)).URL)
			dateproxy.Read(t, skewed.SampleClock).Check(t, offset, 0, clockSlack)
			plain := newClockStore(t, dateproxy.Start(t, srv.Endpoint, dateproxy.Stamp(0)).URL)
			dateproxy.Read(t, plain.SampleClock).Check(t, 0, offset, clockSlack)
		})
	}
}

// TestSampleClockBadDate: an answer without a Date header, or with one that
// is not an HTTP date, is an error that says so, never a zero time.
func TestSampleClockBadDate(t *testing.T) {
	for _, tc := range dateproxy.BadDates {
		t.Run(tc.Name, func(t *testing.T) {
			endpoint := dateproxy.Start(t, srv.Endpoint, dateproxy.Raw(tc.Date)).URL
			got, res, err := newClockStore(t, endpoint).SampleClock(t.Context())
			var oe *driver.OpError
			if !errors.As(err, &oe) || oe.Backend != "dynamodb" || oe.Op != "sample clock" || !got.IsZero() || res != 0 {
				t.Fatalf("SampleClock = %v, %v, %v; want zero values and a dynamodb sample clock *driver.OpError", got, res, err)
			}
			says := "no Date header in the answer"
			if tc.Date != "" {
				says = fmt.Sprintf("unparsable Date header %q in the answer", tc.Date)
			}
			if !strings.Contains(err.Error(), says+" from "+endpoint) {
				t.Errorf("err = %q, want it to say %q and name %s", err, says, endpoint)
			}
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
	// The server stays paused until the call returns, so returning with
	// DeadlineExceeded (checked below) proves the context was honoured;
	// how soon is the machine's load, so the bound only catches a hang.
	if d := time.Since(start); d > hangGuard {
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
	check("killed", sampleErr(t.Context()), driver.ErrUnreachable, "cannot reach dynamodb at "+own.Endpoint+": connection refused")
}

// clockWarnings returns the logged lines that name Settings.ClockSkew.
func clockWarnings(logs *bytes.Buffer) []string {
	var out []string
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(line, "Settings.ClockSkew") {
			out = append(out, line)
		}
	}
	return out
}

// skewedBreaker is a Breaker with settings s, logging to the returned
// buffer, over dynalite behind a proxy that moves its Date by offset; its
// keys are under a prefix of their own, which the clock check looks
// through. Read the buffer only while no background sample runs: with
// SkipClockCheck, or after Close.
func skewedBreaker(t *testing.T, offset time.Duration, s kvbreaker.Settings) (*kvbreaker.Breaker, *bytes.Buffer) {
	t.Helper()
	// Stamped from this machine's clock: see TestSampleClock.
	p, err := kvbreaker.Prefixed(newClockStore(t, dateproxy.Start(t, srv.Endpoint, dateproxy.Stamp(offset)).URL), uniquePrefix(t))
	if err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{}
	s.Logger = slog.New(slog.NewTextHandler(logs, nil))
	b, err := kvbreaker.New(p, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b, logs
}

// checkEstimate fails t unless o holds offset (to within clockSlack, the
// clock-reading paths) and is no wider than one Date second plus took, the
// time the samples took: every sample's interval holds the true offset, and
// the estimate is their intersection.
func checkEstimate(t *testing.T, o kvbreaker.ClockOffset, offset, took time.Duration) {
	t.Helper()
	lo, hi := o.Offset-o.Uncertainty, o.Offset+o.Uncertainty
	if lo > offset+clockSlack || hi < offset-clockSlack {
		t.Errorf("estimate %v ± %v = [%v, %v] does not hold the proxy's offset %v", o.Offset, o.Uncertainty, lo, hi, offset)
	}
	if hi-lo > time.Second+took {
		t.Errorf("estimate %v ± %v is wider than a Date second and the %v the samples took", o.Offset, o.Uncertainty, took)
	}
	t.Logf("offset %v: estimate %v ± %v", offset, o.Offset, o.Uncertainty)
}

// TestCheckClockSkewed: a Breaker over dynalite whose Date is off by a
// known offset estimates that offset with CheckClock, and warns exactly
// once, naming Settings.ClockSkew, when the offset is proven beyond it; a
// second CheckClock does not warn again. The negative control, the same
// proxy with no offset, estimates an interval holding 0 and warns nothing.
func TestCheckClockSkewed(t *testing.T) {
	for _, tc := range []struct {
		offset time.Duration
		want   string // the warning's words; "" for none
	}{
		{7 * time.Second, "behind the store's, more than Settings.ClockSkew (1s) assumes"},
		{-90 * time.Second, "ahead of the store's, more than Settings.ClockSkew (1s) assumes"},
		{0, ""},
	} {
		t.Run(tc.offset.String(), func(t *testing.T) {
			b, logs := skewedBreaker(t, tc.offset, kvbreaker.Settings{SkipClockCheck: true})
			for i := range 2 {
				start := time.Now()
				o, err := b.CheckClock(t.Context())
				took := time.Since(start)
				if err != nil {
					t.Fatal(err)
				}
				checkEstimate(t, o, tc.offset, took)
				if cur, ok := b.ClockOffset(); !ok || cur != o {
					t.Errorf("ClockOffset() = %+v, %v; want what CheckClock returned, %+v", cur, ok, o)
				}
				w := clockWarnings(logs)
				switch {
				case tc.want == "" && len(w) != 0:
					t.Errorf("check %d: warned %q; want nothing at offset %v", i+1, w, tc.offset)
				case tc.want != "" && (len(w) != 1 || !strings.Contains(w[0], "level=WARN") || !strings.Contains(w[0], tc.want)):
					t.Errorf("check %d: warnings %q; want exactly one saying %q", i+1, w, tc.want)
				}
			}
		})
	}
}

// TestBackgroundClockCheckSkewed: a Breaker with the default settings
// samples the store's clock in the background after its first store call,
// without being asked, and warns once of a Date 7 s ahead.
func TestBackgroundClockCheckSkewed(t *testing.T) {
	const offset = 7 * time.Second
	b, logs := skewedBreaker(t, offset, kvbreaker.Settings{})
	if _, ok := b.ClockOffset(); ok {
		t.Fatal("an estimate before any store call")
	}
	start := time.Now()
	if _, err := b.Allow(t.Context(), "clock.example", time.Time{}); err != nil {
		t.Fatal(err)
	}
	// The sample runs on its own goroutine: poll for its estimate, bounded.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	var o kvbreaker.ClockOffset
	for ok := false; !ok; {
		select {
		case <-tick.C:
			o, ok = b.ClockOffset()
		case <-deadline:
			t.Fatal("no estimate 10 s after the first Allow")
		}
	}
	took := time.Since(start)
	// Close waits for the background sample to end, so its warning, which
	// follows the estimate, has been logged by then.
	if err := b.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkEstimate(t, o, offset, took)
	if w := clockWarnings(logs); len(w) != 1 || !strings.Contains(w[0], "behind the store's, more than Settings.ClockSkew (1s) assumes") {
		t.Errorf("warnings %q; want exactly one, of a clock 7 s behind the store's", w)
	}
}

// hangGuard bounds a call that should end with its context: far past any
// delay a loaded machine adds, short of waiting for the paused server.
const hangGuard = 30 * time.Second
