package dateproxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/testservers/dateproxy"
)

// upstreamDate is the Date the upstream sends on /dated.
const upstreamDate = "Thu, 01 Jan 2026 00:00:00 GMT"

// upstream is a real HTTP server that echoes the request it got and sends
// upstreamDate on /dated, no Date elsewhere.
func upstream(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Date"] = nil
		if r.URL.Path == "/dated" {
			w.Header().Set("Date", upstreamDate)
		}
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.RequestURI(), body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// get POSTs "hi" to path through the proxy and returns the answer's Date
// values and body, checking the upstream saw the request as sent.
func get(t *testing.T, p *dateproxy.Proxy, path string) (date []string, status int) {
	t.Helper()
	res, err := http.Post(p.URL+path+"?q=1", "text/plain", strings.NewReader("hi"))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode == http.StatusOK && string(body) != "POST "+path+"?q=1 hi" {
		t.Errorf("upstream saw %q, want the request as sent", body)
	}
	return res.Header["Date"], res.StatusCode
}

// TestDates: each Date mode, switched at run time on one proxy, against an
// upstream with and without a Date of its own.
func TestDates(t *testing.T) {
	up := upstream(t)
	p := dateproxy.Start(t, up, dateproxy.Date{})
	if u, err := url.Parse(p.URL); err != nil || u.Hostname() != "127.0.0.1" {
		t.Fatalf("proxy URL %q, want one on 127.0.0.1", p.URL)
	}
	upTime, _ := http.ParseTime(upstreamDate)
	for _, tc := range []struct {
		date  dateproxy.Date
		path  string
		want  string // "" for no Date header at all
		stamp time.Duration
	}{
		{dateproxy.Date{}, "/dated", upstreamDate, 0},
		// Without the nil Date trick net/http would add the proxy's own.
		{dateproxy.Date{}, "/plain", "", 0},
		{dateproxy.Shift(7 * time.Second), "/dated", upTime.Add(7 * time.Second).Format(http.TimeFormat), 0},
		{dateproxy.Shift(-90 * time.Second), "/dated", upTime.Add(-90 * time.Second).Format(http.TimeFormat), 0},
		{dateproxy.Raw("the day after tomorrow"), "/dated", "the day after tomorrow", 0},
		{dateproxy.Raw(""), "/dated", "", 0},
		{dateproxy.Stamp(7 * time.Second), "/dated", "stamped", 7 * time.Second},
		{dateproxy.Stamp(-90 * time.Second), "/plain", "stamped", -90 * time.Second},
	} {
		t.Run(tc.date.String()+tc.path, func(t *testing.T) {
			p.Set(tc.date)
			before := time.Now()
			date, status := get(t, p, tc.path)
			after := time.Now()
			switch {
			case status != http.StatusOK:
				t.Fatalf("status %d", status)
			case tc.want == "" && date != nil:
				t.Errorf("Date %q, want none", date)
			case tc.want == "stamped":
				// This machine's clock moved by the offset, to the
				// second, read between before and after.
				got, err := http.ParseTime(strings.Join(date, ","))
				lo, hi := before.Add(tc.stamp).Truncate(time.Second), after.Add(tc.stamp)
				if err != nil || got.Before(lo) || got.After(hi) {
					t.Errorf("Date %q (%v), want one in [%v, %v]", date, err, lo, hi)
				}
			case tc.want != "" && (len(date) != 1 || date[0] != tc.want):
				t.Errorf("Date %q, want %q", date, tc.want)
			}
		})
	}
}

// errTB is a testing.TB whose Errorf is recorded instead of failing the
// test: the test of what Shift reports.
type errTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (e *errTB) Errorf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

func (e *errTB) reported() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.errs...)
}

// TestShiftWithoutDate: Shift over an answer without a Date fails the test
// saying why, and the client gets a 502, never an answer without Date or
// with one made up; the same proxy over a dated answer reports nothing.
func TestShiftWithoutDate(t *testing.T) {
	tb := &errTB{TB: t}
	p := dateproxy.Start(tb, upstream(t), dateproxy.Shift(time.Second))
	if _, status := get(t, p, "/dated"); status != http.StatusOK || len(tb.reported()) != 0 {
		t.Fatalf("control: status %d, reported %q", status, tb.reported())
	}
	date, status := get(t, p, "/plain")
	if status != http.StatusBadGateway {
		t.Errorf("status %d (Date %q), want 502", status, date)
	}
	if errs := tb.reported(); len(errs) != 1 || !strings.Contains(errs[0], `dateproxy: cannot shift the upstream's Date ""`) {
		t.Errorf("reported %q, want one error about the missing Date", errs)
	}
}

// TestReading: a reading through a Stamp proxy fits its offset and not
// another; bounds wide enough to pass both would be reported.
func TestReading(t *testing.T) {
	p := dateproxy.Start(t, upstream(t), dateproxy.Stamp(7*time.Second))
	sample := func(ctx context.Context) (time.Time, time.Duration, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return time.Time{}, 0, err
		}
		defer res.Body.Close()
		d, err := http.ParseTime(res.Header.Get("Date"))
		return d, time.Second, err
	}
	r := dateproxy.Read(t, sample)
	r.Check(t, 7*time.Second, 0, time.Millisecond)
	if r.Outside(-7*time.Second, time.Millisecond) == "" || r.Outside(7*time.Second, 0) != "" {
		t.Errorf("reading %+v: bounds for -7s pass or for 7s without slack fail", r)
	}
	tb := &errTB{TB: t}
	r.Check(tb, 7*time.Second, 7*time.Second+time.Millisecond, time.Millisecond)
	if errs := tb.reported(); len(errs) != 1 || !strings.Contains(errs[0], "passes the bounds for 7.001s too") {
		t.Errorf("checking against a control 1 ms away reported %q, want that the bounds prove nothing", errs)
	}
}
