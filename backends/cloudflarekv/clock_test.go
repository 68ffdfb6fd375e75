package cloudflarekv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudflare/cloudflare-go/v6/kv"
	"github.com/cloudflare/cloudflare-go/v6/option"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/testservers/dateproxy"
)

// clockSlack is what the bounds allow beyond resolution and the round trip:
// Miniflare runs on this machine and stamps Date from the same clock,
// between before and after; the slack covers only the clock-reading paths.
const clockSlack = 5 * time.Millisecond

// clockOffsetOutside says why got, a server reading with resolution res
// taken between before and after on this machine's clock, is not what a
// server clock offset ahead of this one would give: the server's true
// reading lies in [got, got+res), and when it read its clock this machine
// read something in [before, after]. "" when it is.
func clockOffsetOutside(before, after, got time.Time, res, offset time.Duration) string {
	lo, hi := before.Add(offset-res-clockSlack), after.Add(offset+clockSlack)
	if got.Before(lo) || got.After(hi) {
		return fmt.Sprintf("server clock %v outside [%v, %v] for offset %v (sample - before = %v, round trip %v)",
			got, lo, hi, offset, got.Sub(before), after.Sub(before))
	}
	return ""
}

// clockSample times one SampleClock call on this machine's clock.
func clockSample(t *testing.T, s *Store) (before, after, got time.Time, res time.Duration) {
	t.Helper()
	before = time.Now()
	got, res, err := s.SampleClock(t.Context())
	after = time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if res != time.Second {
		t.Errorf("resolution = %v, want 1s (HTTP Date)", res)
	}
	return before, after, got, res
}

// clockStore returns a store over the API at endpoint with srv's account,
// namespace and token, whose connections are counted.
func clockStore(t *testing.T, endpoint string) (*Store, *atomic.Int32) {
	t.Helper()
	var dials atomic.Int32
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	c := kv.NewKVService(option.WithBaseURL(endpoint+"/client/v4/"), option.WithAPIToken(srv.Token), option.WithHTTPClient(&http.Client{Transport: tr}))
	s, err := New(c, srv.AccountID, srv.NamespaceID)
	if err != nil {
		t.Fatal(err)
	}
	return s, &dials
}

// TestSampleClock: through a proxy that stamps Date on this machine's clock,
// as Cloudflare's edge would, SampleClock reads that clock, truncated to
// the second, within the round trip, with exactly one GET per sample.
func TestSampleClock(t *testing.T) {
	s, _ := clockStore(t, dateproxy.Start(t, srv.URL, dateproxy.Stamp(0)).URL)
	ctx := t.Context()
	if err := srv.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 5
	for range n {
		before, after, got, res := clockSample(t, s)
		if why := clockOffsetOutside(before, after, got, res, 0); why != "" {
			t.Error(why)
		}
		if got.Nanosecond() != 0 {
			t.Errorf("sample %v has a fraction of a second; an HTTP Date has none", got)
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
// resolution and the round trip; through the same proxy with Date on time
// (the negative control) it is off by nothing, and the skewed bounds then
// fail.
func TestSampleClockSkewed(t *testing.T) {
	for _, offset := range []time.Duration{7 * time.Second, -90 * time.Second} {
		t.Run(offset.String(), func(t *testing.T) {
			skewed, _ := clockStore(t, dateproxy.Start(t, srv.URL, dateproxy.Stamp(offset)).URL)
			before, after, got, res := clockSample(t, skewed)
			if why := clockOffsetOutside(before, after, got, res, offset); why != "" {
				t.Error(why)
			}
			if clockOffsetOutside(before, after, got, res, 0) == "" {
				t.Errorf("a sample %v off passes the bounds for no offset", offset)
			}
			// The estimate a Breaker would make: the midpoints of the
			// server's interval and this machine's.
			est := got.Add(res / 2).Sub(before.Add(after.Sub(before) / 2))
			t.Logf("offset %v: estimated %v (± %v)", offset, est, (res+after.Sub(before))/2)

			plain, _ := clockStore(t, dateproxy.Start(t, srv.URL, dateproxy.Stamp(0)).URL)
			before, after, got, res = clockSample(t, plain)
			if why := clockOffsetOutside(before, after, got, res, 0); why != "" {
				t.Errorf("control: %s", why)
			}
			if clockOffsetOutside(before, after, got, res, offset) == "" {
				t.Errorf("control: an unshifted sample passes the bounds for offset %v", offset)
			}
		})
	}
}

// TestSampleClockMiniflareSendsNoDate: Miniflare (workerd) answers without
// a Date header, so against it directly SampleClock says so rather than
// return a time. Cloudflare's edge stamps Date on every answer; if a
// Miniflare release adds one, this test fails, and the bounds can be
// checked against Miniflare without the proxy.
func TestSampleClockMiniflareSendsNoDate(t *testing.T) {
	s, _ := clockStore(t, srv.URL)
	got, res, err := s.SampleClock(t.Context())
	want := "cloudflarekv: sample clock: no Date header in the answer from " + srv.URL
	if err == nil || err.Error() != want || !got.IsZero() || res != 0 {
		t.Fatalf("SampleClock = %v, %v, %v; want the error %q", got, res, err, want)
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
			endpoint := dateproxy.Start(t, srv.URL, dateproxy.Raw(tc.date)).URL
			s, _ := clockStore(t, endpoint)
			got, res, err := s.SampleClock(t.Context())
			oe, ok := errors.AsType[*driver.OpError](err)
			if !ok || oe.Backend != "cloudflarekv" || oe.Op != "sample clock" {
				t.Fatalf("SampleClock = %v, %v, %v; want a cloudflarekv sample clock *driver.OpError", got, res, err)
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

// TestSampleClockErrors: a canceled context sends nothing; a closed port is
// an *UnreachableError after one connection attempt (no retry); a silent
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
		s, dials := clockStore(t, srv.URL)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		got, res, err := s.SampleClock(ctx)
		check("canceled", got, res, err, context.Canceled, "")
		if n := dials.Load(); n != 0 {
			t.Errorf("%d connections for a canceled call, want 0", n)
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		endpoint := "http://" + ln.Addr().String()
		_ = ln.Close() // nothing listens there now: connections are refused
		s, dials := clockStore(t, endpoint)
		start := time.Now()
		got, res, err := s.SampleClock(t.Context())
		check("unreachable", got, res, err, ErrUnreachable, "cannot reach Workers KV at "+endpoint+": connection refused")
		if d := time.Since(start); d > time.Second {
			t.Errorf("took %v for a refused connection", d)
		}
		if n := dials.Load(); n != 1 {
			t.Errorf("%d connection attempts, want 1", n)
		}
	})

	t.Run("silent", func(t *testing.T) {
		endpoint := silentListener(t)
		s, _ := clockStore(t, endpoint)
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		got, res, err := s.SampleClock(ctx)
		check("silent", got, res, err, context.DeadlineExceeded, "no answer from Workers KV at "+endpoint+" before the context ended")
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("took %v with a 300 ms context", d)
		}
	})

	t.Run("rate-limited", func(t *testing.T) {
		s, _ := clockStore(t, dateproxy.Start(t, srv.URL, dateproxy.Stamp(0)).URL)
		ctx := t.Context()
		clockSample(t, s) // negative control: the same store samples before the 429
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
