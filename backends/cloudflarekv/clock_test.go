package cloudflarekv

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
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/dateproxy"
)

// clockSlack is what the bounds allow beyond resolution and the round trip:
// Miniflare runs on this machine and stamps Date from the same clock,
// between before and after; the slack covers only the clock-reading paths.
const clockSlack = 5 * time.Millisecond

// TestSampleClock: through a proxy that stamps Date on this machine's clock,
// as Cloudflare's edge would, SampleClock reads that clock, truncated to
// the second, within the round trip, with exactly one GET per sample.
func TestSampleClock(t *testing.T) {
	s, _ := countingStore(t, dateproxy.Start(t, srv.URL, dateproxy.Stamp(0)).URL)
	ctx := t.Context()
	if err := srv.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 5
	for range n {
		r := dateproxy.Read(t, s.SampleClock)
		if why := r.Outside(0, clockSlack); why != "" {
			t.Error(why)
		}
		if r.Server.Nanosecond() != 0 {
			t.Errorf("sample %v has a fraction of a second; an HTTP Date has none", r.Server)
		}
	}
	st, err := srv.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Get != n || st.Put+st.Delete != 0 {
		t.Errorf("the Worker served %+v for %d samples, want %d GETs and nothing else", st, n, n)
	}
}

// TestSampleClockSkewed: behind a proxy whose Date is off by a known
// offset, SampleClock's reading is off by that offset, within the
// resolution and the round trip, and not by none; with Date on time (the
// negative control), by none and not by the offset.
func TestSampleClockSkewed(t *testing.T) {
	for _, offset := range []time.Duration{7 * time.Second, -90 * time.Second} {
		t.Run(offset.String(), func(t *testing.T) {
			p := dateproxy.Start(t, srv.URL, dateproxy.Stamp(offset))
			s, _ := countingStore(t, p.URL)
			dateproxy.Read(t, s.SampleClock).Check(t, offset, 0, clockSlack)
			p.Set(dateproxy.Stamp(0))
			dateproxy.Read(t, s.SampleClock).Check(t, 0, offset, clockSlack)
		})
	}
}

// TestSampleClockFixture: our Worker stamps Date on every API answer, as
// Cloudflare's edge does (Miniflare adds none of its own), so SampleClock
// reads this machine's clock from it directly, within the resolution and the
// round trip, and not one 7 s off (the negative control).
func TestSampleClockFixture(t *testing.T) {
	s, _ := countingStore(t, srv.URL)
	dateproxy.Read(t, s.SampleClock).Check(t, 0, 7*time.Second, clockSlack)
}

// TestSampleClockBadDate: an answer without a Date header, or with one that
// is not an HTTP date, is an error that says so, never a zero time.
func TestSampleClockBadDate(t *testing.T) {
	p := dateproxy.Start(t, srv.URL, dateproxy.Stamp(0))
	s, _ := countingStore(t, p.URL)
	dateproxy.Read(t, s.SampleClock) // negative control: a good Date reads
	for _, bad := range dateproxy.BadDates {
		p.Set(dateproxy.Raw(bad.Date))
		got, res, err := s.SampleClock(t.Context())
		want := "cloudflarekv: sample clock: no Date header in the answer from " + p.URL
		if bad.Date != "" {
			want = fmt.Sprintf("cloudflarekv: sample clock: unparsable Date header %q in the answer from %s", bad.Date, p.URL)
		}
		if oe, ok := errors.AsType[*driver.OpError](err); !ok || oe.Backend != "cloudflarekv" || err.Error() != want || !got.IsZero() || res != 0 {
			t.Errorf("%s: SampleClock = %v, %v, %v; want zero values and the *driver.OpError %q", bad.Name, got, res, err, want)
		}
	}
}

// TestSampleClockErrors: a canceled context sends nothing; a closed port is
// an *driver.UnreachableError after one connection attempt (no retry); a silent
// API ends with the caller's context, saying nobody answered; a 429 is a
// *RateLimitError, and the store then sends no sample until Retry-After has
// passed. Each is a cloudflarekv *driver.OpError with zero values.
func TestSampleClockErrors(t *testing.T) {
	check := func(what string, got time.Time, res time.Duration, err error, cause error, says string) {
		t.Helper()
		oe, ok := errors.AsType[*driver.OpError](err)
		if !ok || oe.Backend != "cloudflarekv" || oe.Op != "sample clock" {
			t.Errorf("%s: err = %v, want a cloudflarekv sample clock *driver.OpError", what, err)
		} else if !errors.Is(err, cause) || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: err = %v, want it to match %v and say %q", what, err, cause, says)
		}
		if !got.IsZero() || res != 0 {
			t.Errorf("%s: SampleClock = %v, %v with error %v; want zero values", what, got, res, err)
		}
		t.Logf("%s: %v", what, err)
	}

	t.Run("canceled", func(t *testing.T) {
		s, dials := countingStore(t, srv.URL)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		got, res, err := s.SampleClock(ctx)
		check("canceled", got, res, err, context.Canceled, "")
		if n := dials.Load(); n != 0 {
			t.Errorf("%d connections for a canceled call, want 0", n)
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		endpoint := "http://" + backendtest.ClosedPort(t)
		s, dials := countingStore(t, endpoint)
		start := time.Now()
		got, res, err := s.SampleClock(t.Context())
		check("unreachable", got, res, err, driver.ErrUnreachable, "cannot reach Workers KV at "+endpoint+": connection refused")
		if d := time.Since(start); d > time.Second {
			t.Errorf("took %v for a refused connection", d)
		}
		if n := dials.Load(); n != 1 {
			t.Errorf("%d connection attempts, want 1", n)
		}
	})

	t.Run("silent", func(t *testing.T) {
		addr, _ := backendtest.SilentListener(t)
		endpoint := "http://" + addr
		s, _ := countingStore(t, endpoint)
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		got, res, err := s.SampleClock(ctx)
		check("silent", got, res, err, context.DeadlineExceeded, "no answer from Workers KV at "+endpoint+" before the context ended")
		// The listener never answers, so returning with DeadlineExceeded
		// (checked above) proves the context was honoured; how soon is the
		// machine's load, so the bound only catches a hang.
		if d := time.Since(start); d > hangGuard {
			t.Errorf("took %v with a 300 ms context", d)
		}
	})

	t.Run("rate-limited", func(t *testing.T) {
		s, _ := countingStore(t, dateproxy.Start(t, srv.URL, dateproxy.Stamp(0)).URL)
		ctx := t.Context()
		dateproxy.Read(t, s.SampleClock) // negative control: the same store samples before the 429
		if err := srv.Throttle(ctx, 1, time.Second); err != nil {
			t.Fatal(err)
		}
		if err := srv.ResetStats(ctx); err != nil {
			t.Fatal(err)
		}
		got, res, err := s.SampleClock(ctx)
		check("429", got, res, err, ErrRateLimited, "rate limited (429)")
		got, res, err = s.SampleClock(ctx)
		check("backing off", got, res, err, ErrRateLimited, "rate limited (429)")
		st, err := srv.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Get != 1 || st.Throttled != 1 {
			t.Errorf("the Worker served %+v, want the one throttled GET: no retry, nothing sent while backing off", st)
		}
	})
}

// TestBreakerClockStep: a Breaker over Workers KV whose Date (stamped as
// the edge would) is 7 s ahead estimates that offset with CheckClock and
// warns once, naming Settings.ClockSkew. When the store's clock then steps
// to 90 s behind, CheckClock follows it (the older samples no longer agree
// and are dropped) and warns no more: once per Breaker. Nothing is
// estimated or warned before the first check (the negative control).
// (backends/dynamodb tests the background check and the offset-0 control.)
func TestBreakerClockStep(t *testing.T) {
	p := dateproxy.Start(t, srv.URL, dateproxy.Stamp(7*time.Second))
	s, _ := countingStore(t, p.URL)
	var logs bytes.Buffer // no background check writes to it
	b, err := kvbreaker.New(s, kvbreaker.Settings{SkipClockCheck: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.Close(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	skewWarnings := func() (w []string) {
		for line := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(line, "Settings.ClockSkew") { // not the last-writer-wins warning
				w = append(w, line)
			}
		}
		return w
	}
	if o, ok := b.ClockOffset(); ok || len(skewWarnings()) != 0 {
		t.Fatalf("before any check: estimate %+v, warnings %q; want none", o, skewWarnings())
	}
	for _, offset := range []time.Duration{7 * time.Second, -90 * time.Second} {
		p.Set(dateproxy.Stamp(offset))
		start := time.Now()
		o, err := b.CheckClock(t.Context())
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		// Every sample's interval holds the offset, and the estimate is
		// their intersection: no wider than one Date second plus the
		// round trips.
		lo, hi := o.Offset-o.Uncertainty, o.Offset+o.Uncertainty
		if lo > offset+clockSlack || hi < offset-clockSlack || hi-lo > time.Second+took {
			t.Errorf("estimate %v ± %v, want it to hold %v and be at most a Date second plus the %v the samples took", o.Offset, o.Uncertainty, offset, took)
		}
		t.Logf("offset %v: estimate %v ± %v", offset, o.Offset, o.Uncertainty)
		if w := skewWarnings(); len(w) != 1 || !strings.Contains(w[0], "behind the store's, more than Settings.ClockSkew (1s) assumes") {
			t.Errorf("after the check at %v: warnings %q; want the one of a clock 7 s behind the store's", offset, w)
		}
	}
}

// hangGuard bounds a call that should end with its context: far past any
// delay a loaded machine adds, short of waiting for a silent server.
const hangGuard = 30 * time.Second
