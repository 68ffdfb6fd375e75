package serve

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
)

// dashFixture is kvbreaker dashboard as the command builds it, over a
// memory store that a second Breaker (a worker) writes to directly.
type dashFixture struct {
	*fixture
	ro     driver.Store // the ReadOnly store, for Refused
	worker *kvbreaker.Breaker
}

// tokAll carries every permission: the dashboard must refuse its writes
// for what the dashboard is, not for what the token lacks.
const tokAll = "all-permissions-token-0123456789"

func newDashFixture(t *testing.T) *dashFixture {
	t.Helper()
	store := memory.New()
	worker, err := kvbreaker.New(store, kvbreaker.Settings{FailureThreshold: 2, RecoveryDelay: recovery, SkipClockCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	ro := ReadOnly(store)
	stats := NewStats(false)
	b, err := kvbreaker.New(ro, kvbreaker.Settings{FailureThreshold: 2, RecoveryDelay: recovery, SkipClockCheck: true, Observer: stats.Observer()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{
		Breaker: b, ReadOnly: true, Stats: stats, RecoveryDelay: recovery,
		Tokens: []Token{
			NewToken("dash", PermRead, tokReader),
			NewToken("root", PermDecide|PermReport|PermRead|PermReset|PermMetrics, tokAll),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	polls := &pollLog{}
	hs := httptest.NewServer(polls.wrap(srv.Handler()))
	t.Cleanup(func() {
		hs.Close()
		_ = b.Close(context.Background())
		_ = worker.Close(context.Background())
	})
	return &dashFixture{fixture: &fixture{t: t, store: store, b: b, srv: srv, url: hs.URL, polls: polls}, ro: ro, worker: worker}
}

// TestReadOnlyRefusesWrites: a read-only server answers every route that
// writes with 405 and the read-only problem, whatever the token carries
// and before reading the body, and changes nothing in the store; its
// reads still work.
func TestReadOnlyRefusesWrites(t *testing.T) {
	d := newDashFixture(t)
	ctx := t.Context()
	for range 2 {
		if err := d.worker.Record(ctx, "ro.example", kvbreaker.Failure); err != nil {
			t.Fatal(err)
		}
	}
	before, err := d.worker.Inspect(ctx, "ro.example")
	if err != nil || before.State != kvbreaker.StateOpen {
		t.Fatalf("the worker did not open the circuit: %+v, %v", before, err)
	}
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/decide", `{"deliveries":[{"host":"ro.example"}]}`},
		{"POST", "/v1/outcomes", `{"outcomes":[{"host":"ro.example","outcome":"success"}]}`},
		{"POST", "/v1/abandon", `{"probe_id":"x"}`},
		{"DELETE", "/v1/circuits/ro.example", ""},
	} {
		for _, tok := range []string{tokAll, tokReader, ""} {
			code, ct, body := d.do(r.method, r.path, tok, r.body)
			if code != 405 || ct != "application/problem+json" || !strings.Contains(string(body), problemPrefix+"read-only") {
				t.Errorf("%s %s (token %q): %d %s %s, want 405 and the read-only problem", r.method, r.path, tok, code, ct, body)
			}
		}
	}
	after, err := d.worker.Inspect(ctx, "ro.example")
	if err != nil || after.Version != before.Version {
		t.Errorf("the store's record changed: version %v, then %v (%v)", before.Version, after.Version, err)
	}
	if n := Refused(d.ro); n != 0 {
		t.Errorf("the store was asked %d writes: the routes reached the Breaker", n)
	}
	var c CircuitsResponse
	d.call("GET", "/v1/circuits", tokReader, "", 200, &c)
	if len(c.Circuits) != 1 || c.Circuits[0].Host != "ro.example" || c.Circuits[0].State != "open" {
		t.Errorf("GET /v1/circuits: %+v", c)
	}
	var st StatusResponse
	d.call("GET", "/v1/status", tokReader, "", 200, &st)
	if !st.ReadOnly || len(st.Circuits) != 1 {
		t.Errorf("GET /v1/status: %+v", st)
	}

	// Negative control: a write that does reach the read-only store is
	// refused and counted, so a zero count above means none reached it.
	if err := d.b.Record(ctx, "ro.example", kvbreaker.Failure); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Record through the read-only store: %v, want ErrReadOnly", err)
	}
	if n := Refused(d.ro); n == 0 {
		t.Error("the refused write was not counted")
	}
}

// TestDashboardPage: in headless Chromium, the read-only page shows a
// circuit that another Breaker opens within a second, offers no reset
// and says why, logs no console error, and in all that time makes no
// write: the store's record keeps its version and the read-only store
// below the dashboard's Breaker was asked no write. Screenshots at two
// widths go to the test's artifact directory.
func TestDashboardPage(t *testing.T) {
	d := newDashFixture(t)
	ctx, consoleErrors := browser(t)
	login(t, ctx, d.url, tokReader)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("readonly"))); err != nil {
		t.Fatalf("the page does not say it is read-only: %v", err)
	}

	opened := time.Now()
	for range 2 {
		if err := d.worker.Record(t.Context(), "dash.example", kvbreaker.Failure); err != nil {
			t.Fatal(err)
		}
	}
	written, err := d.worker.Inspect(t.Context(), "dash.example")
	if err != nil || written.State != kvbreaker.StateOpen {
		t.Fatalf("the worker did not open the circuit: %+v, %v", written, err)
	}
	row := chromedp.CSS(`tr[data-host="dash.example"]`)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(row)); err != nil {
		t.Fatalf("the opened circuit did not appear: %v", err)
	}
	undecided := shownWithin(t, ctx, row, opened, d.polls)
	if state, err := stateShown(ctx, "dash.example"); err != nil || state != "open" {
		t.Fatalf("state shown %q, %v", state, err)
	}
	// No button anywhere in the table, and the Action column is hidden.
	buttons, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#circuits button").length`))
	if err != nil {
		t.Fatal(err)
	}
	if buttons != 0 {
		t.Errorf("the read-only page shows %d buttons in its table", buttons)
	}
	if hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("action").hidden`)); err != nil || !hidden {
		t.Errorf("the Action column is shown (%v)", err)
	}
	// The page's own script, asked to reset, is refused.
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch("/v1/circuits/dash.example", {method: "DELETE", headers: {authorization: "Bearer `+tokAll+`"}}).then((r) => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || status != 405 {
		t.Errorf("DELETE from the page: %d, %v; want 405", status, err)
	}
	screenshots(t, ctx, "dashboard")

	// Polls went on meanwhile (the page polls four times a second); the
	// store still holds the record as the worker wrote it.
	after, err := d.worker.Inspect(t.Context(), "dash.example")
	if err != nil || after.Version != written.Version {
		t.Errorf("the store's record changed while the page ran: version %v, then %v (%v)", written.Version, after.Version, err)
	}
	if n := Refused(d.ro); n != 0 {
		t.Errorf("the dashboard's Breaker asked the store for %d writes", n)
	}
	if errs := consoleErrors(); len(errs) > 0 {
		// The refused DELETE logs its 405 as a failed resource load.
		errs = slices.DeleteFunc(errs, func(e string) bool { return strings.Contains(e, "405") })
		if len(errs) > 0 {
			t.Errorf("the console shows errors: %q", errs)
		}
	}
	if undecided != "" {
		t.Skip(undecided)
	}
}
