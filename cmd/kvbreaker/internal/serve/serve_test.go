package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	tokWorker   = "worker-token-0123456789"
	tokReader   = "reader-token-0123456789"
	tokOperator = "operator-token-0123456789"
	tokMetrics  = "metrics-token-0123456789"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type fixture struct {
	t     *testing.T
	clock *fakeClock
	store *memory.Store
	b     *kvbreaker.Breaker
	srv   *Server
	url   string
	polls *pollLog
}

const recovery = time.Minute

func newFixture(t *testing.T) *fixture {
	t.Helper()
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	store := memory.New(memory.WithClock(clock.now))
	stats := NewStats(false)
	metrics, err := NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = metrics.Shutdown(context.Background()) })
	obs := kvbreaker.ComposeObservers(stats.Observer(), metrics.Observer())
	b, err := kvbreaker.New(store, kvbreaker.Settings{FailureThreshold: 2, RecoveryDelay: recovery, ReleaseInterval: time.Second, Clock: clock.now, SkipClockCheck: true, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{
		Breaker: b,
		Tokens: []Token{
			NewToken("workers", PermDecide|PermReport, tokWorker),
			NewToken("dash", PermRead, tokReader),
			NewToken("oncall", PermRead|PermReset, tokOperator),
			NewToken("prometheus", PermMetrics, tokMetrics),
		},
		RecoveryDelay: recovery,
		Stats:         stats,
		Metrics:       metrics,
		MaxBatch:      10,
		MaxBody:       4096,
		Clock:         clock.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	polls := &pollLog{}
	hs := httptest.NewServer(polls.wrap(srv.Handler()))
	t.Cleanup(func() {
		hs.Close()
		_ = b.Close(context.Background())
	})
	return &fixture{t: t, clock: clock, store: store, b: b, srv: srv, url: hs.URL, polls: polls}
}

// do sends a request with token (none if empty) and returns the status,
// the content type and the body.
func (f *fixture) do(method, path, token, body string) (int, string, []byte) {
	f.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.url+path, r)
	if err != nil {
		f.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// call is do that wants status want and decodes the JSON body into out.
func (f *fixture) call(method, path, token, body string, want int, out any) {
	f.t.Helper()
	code, _, b := f.do(method, path, token, body)
	if code != want {
		f.t.Fatalf("%s %s: status %d, want %d: %s", method, path, code, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			f.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

func (f *fixture) decide(body string) DecideResponse {
	f.t.Helper()
	var out DecideResponse
	f.call("POST", "/v1/decide", tokWorker, body, 200, &out)
	return out
}

func (f *fixture) report(body string) OutcomesResponse {
	f.t.Helper()
	var out OutcomesResponse
	f.call("POST", "/v1/outcomes", tokWorker, body, 200, &out)
	return out
}

// TestCircuitCycle: a circuit through the API as through the library:
// failures open it, holds carry its restraint as retry_at, one probe after
// the recovery delay, an abandoned probe frees the next, a success closes.
func TestCircuitCycle(t *testing.T) {
	f := newFixture(t)
	v := f.decide(`{"deliveries":[{"host":"https://Hooks.Example/inbox"},{"host":"other.example"}]}`)
	if len(v.Verdicts) != 2 || v.Verdicts[0].Host != "hooks.example" || v.Verdicts[0].Decision != "send" || v.Verdicts[1].Decision != "send" {
		t.Fatalf("closed circuit: %+v", v)
	}
	r := f.report(`{"outcomes":[{"host":"hooks.example","outcome":"failure"},{"host":"https://hooks.example/x","outcome":"failure"}]}`)
	if !r.Results[0].Recorded || !r.Results[1].Recorded {
		t.Fatalf("failures not recorded: %+v", r)
	}
	st, err := f.b.Inspect(t.Context(), "hooks.example")
	if err != nil || st.State != kvbreaker.StateOpen {
		t.Fatalf("after 2 failures: %+v, %v", st, err)
	}
	v = f.decide(`{"deliveries":[{"host":"hooks.example"}]}`)
	h := v.Verdicts[0]
	if h.Decision != "hold" || h.RetryAt == nil || !h.RetryAt.Equal(st.RestrainedUntil) || h.HeldSince == nil || *h.RetryInMS != recovery.Milliseconds() {
		t.Fatalf("open circuit: %+v (restrained until %v)", h, st.RestrainedUntil)
	}
	heldSince := h.HeldSince.Format(time.RFC3339Nano)
	f.clock.add(recovery)
	v = f.decide(`{"deliveries":[{"host":"hooks.example","held_since":"` + heldSince + `"}]}`)
	p := v.Verdicts[0]
	if p.Decision != "probe" || p.ProbeID == nil {
		t.Fatalf("after the recovery delay: %+v", p)
	}
	if v := f.decide(`{"deliveries":[{"host":"hooks.example"}]}`); v.Verdicts[0].Decision != "hold" {
		t.Fatalf("a second ask while probing: %+v", v.Verdicts[0])
	}
	// Given up: the next ask probes at once.
	r = f.report(`{"outcomes":[{"host":"hooks.example","outcome":"ignore","probe_id":"` + *p.ProbeID + `"}]}`)
	if !r.Results[0].Abandoned || r.Results[0].Recorded {
		t.Fatalf("ignore with probe_id: %+v", r.Results[0])
	}
	p = f.decide(`{"deliveries":[{"host":"hooks.example"}]}`).Verdicts[0]
	if p.Decision != "probe" {
		t.Fatalf("after abandon: %+v", p)
	}
	var ab AbandonResponse
	f.call("POST", "/v1/abandon", tokWorker, `{"probe_id":"`+*p.ProbeID+`"}`, 200, &ab)
	f.call("POST", "/v1/abandon", tokWorker, `{"probe_id":"`+*p.ProbeID+`"}`, 404, nil)
	p = f.decide(`{"deliveries":[{"host":"hooks.example"}]}`).Verdicts[0]
	if p.Decision != "probe" {
		t.Fatalf("after /v1/abandon: %+v", p)
	}
	var c Circuit
	f.call("GET", "/v1/circuits/hooks.example", tokReader, "", 200, &c)
	if c.State != "half-open" || !c.Probing || c.FailureCount != 2 {
		t.Fatalf("inspect while probing: %+v", c)
	}
	var list CircuitsResponse
	f.call("GET", "/v1/circuits?state=half-open", tokReader, "", 200, &list)
	if len(list.Circuits) != 1 || list.Circuits[0].Host != "hooks.example" {
		t.Fatalf("list: %+v", list)
	}
	f.report(`{"outcomes":[{"host":"hooks.example","outcome":"success","probe_id":"` + *p.ProbeID + `"}]}`)
	if v := f.decide(`{"deliveries":[{"host":"hooks.example"}]}`); v.Verdicts[0].Decision != "send" {
		t.Fatalf("after the probe's success: %+v", v.Verdicts[0])
	}
	// Reset: an operator's, not a reader's.
	f.report(`{"outcomes":[{"host":"a.example","outcome":"failure"},{"host":"a.example","outcome":"failure"}]}`)
	f.call("DELETE", "/v1/circuits/a.example", tokReader, "", 403, nil)
	var rr ResetResponse
	f.call("DELETE", "/"+"v1/circuits/"+url.PathEscape("https://a.example/inbox"), tokOperator, "", 200, &rr)
	if rr.Host != "a.example" || rr.Before.State != "open" {
		t.Fatalf("reset: %+v", rr)
	}
	if v := f.decide(`{"deliveries":[{"host":"a.example"}]}`); v.Verdicts[0].Decision != "send" {
		t.Fatalf("after reset: %+v", v.Verdicts[0])
	}
	// The status page's feed: the open circuit, and what this process
	// decided and asked of the store.
	f.report(`{"outcomes":[{"host":"b.example","outcome":"failure"},{"host":"b.example","outcome":"failure"}]}`)
	var status StatusResponse
	f.call("GET", "/v1/status", tokReader, "", 200, &status)
	if len(status.Circuits) != 1 || status.Circuits[0].Host != "b.example" || status.Circuits[0].State != "open" ||
		status.Decisions["send"] == 0 || status.Decisions["hold"] == 0 || status.Decisions["probe"] != 3 ||
		status.Store.Calls == 0 || status.Store.P99MS == nil || status.Mirror != nil {
		t.Fatalf("status: %+v", status)
	}
	// A message held past HoldLimit is dropped.
	old := f.clock.now().Add(-kvbreaker.Settings{}.WithDefaults().HoldLimit - time.Second).Format(time.RFC3339Nano)
	if v := f.decide(`{"deliveries":[{"host":"a.example","held_since":"` + old + `"}]}`); v.Verdicts[0].Decision != "drop" {
		t.Fatalf("held past the hold limit: %+v", v.Verdicts[0])
	}
}

// snapshot is every record of the store, to show a request changed none.
func (f *fixture) snapshot() string {
	f.t.Helper()
	keys, _, err := f.store.List(context.Background(), "", "", 1000)
	if err != nil {
		f.t.Fatal(err)
	}
	var b strings.Builder
	for _, k := range keys {
		v, ver, err := f.store.Get(context.Background(), k)
		if err != nil {
			f.t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s=%x@%v\n", k, v, ver)
	}
	return b.String()
}

// TestNoValidTokenChangesNothingLearnsNothing: on every route that needs a
// permission, a request without credentials, with a wrong token, a
// malformed header or a token lacking the permission changes no record,
// and its answer is byte for byte the same whether it names an open host
// or one never seen.
func TestNoValidTokenChangesNothingLearnsNothing(t *testing.T) {
	f := newFixture(t)
	f.report(`{"outcomes":[{"host":"open.example","outcome":"failure"},{"host":"open.example","outcome":"failure"}]}`)
	before := f.snapshot()
	if !strings.Contains(before, "open.example") {
		t.Fatalf("no record to protect: %q", before)
	}
	bodies := map[string]func(host string) string{
		"/v1/decide":   func(h string) string { return `{"deliveries":[{"host":"` + h + `"}]}` },
		"/v1/outcomes": func(h string) string { return `{"outcomes":[{"host":"` + h + `","outcome":"success"}]}` },
		"/v1/abandon":  func(h string) string { return `{"probe_id":"` + h + `"}` },
	}
	lacking := map[Permission]string{PermDecide: tokReader, PermReport: tokReader, PermRead: tokWorker, PermReset: tokReader, PermMetrics: tokReader}
	for _, rt := range routes {
		if rt.perm == 0 {
			continue
		}
		for _, cred := range []struct{ name, header string }{
			{"none", ""}, {"wrong", "Bearer not-a-token-of-this-server"}, {"malformed", "Basic " + tokWorker},
			{"lacking", "Bearer " + lacking[rt.perm]},
		} {
			var answers []string
			for _, host := range []string{"open.example", "never.example"} {
				path, body := rt.pattern, ""
				path = strings.ReplaceAll(path, "{host}", host)
				if mk, ok := bodies[rt.pattern]; ok {
					body = mk(host)
				}
				if rt.pattern == "/v1/circuits" {
					path += "?cursor=" + host
				}
				req, _ := http.NewRequest(rt.method, f.url+path, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if cred.header != "" {
					req.Header.Set("Authorization", cred.header)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				want := http.StatusUnauthorized
				if cred.name == "lacking" {
					want = http.StatusForbidden
				}
				if resp.StatusCode != want || resp.Header.Get("Content-Type") != "application/problem+json" {
					t.Errorf("%s %s with %s credentials: %d %s, want %d problem+json: %s", rt.method, path, cred.name, resp.StatusCode, resp.Header.Get("Content-Type"), want, b)
				}
				answers = append(answers, resp.Header.Get("WWW-Authenticate")+"\n"+string(b))
			}
			if answers[0] != answers[1] {
				t.Errorf("%s %s with %s credentials: the answer differs by host:\n%s\n%s", rt.method, rt.pattern, cred.name, answers[0], answers[1])
			}
			if after := f.snapshot(); after != before {
				t.Fatalf("%s %s with %s credentials changed the store:\n%s\nwas\n%s", rt.method, rt.pattern, cred.name, after, before)
			}
		}
	}
	// Negative control: the same requests with the right tokens do change
	// the store, so the comparison above can fail.
	f.call("DELETE", "/v1/circuits/open.example", tokOperator, "", 200, nil)
	if f.snapshot() == before {
		t.Fatal("an authorised reset left the store unchanged: the snapshot cannot see a change")
	}
}

// TestProblems: each kind of bad request is a problem+json that says what
// to change, and decides nothing.
func TestProblems(t *testing.T) {
	f := newFixture(t)
	many := `{"deliveries":[` + strings.Repeat(`{"host":"a.example"},`, 10) + `{"host":"a.example"}]}`
	for _, tc := range []struct {
		name, method, path, ctype, body string
		status                          int
		kind, detail                    string
	}{
		{"not-json", "POST", "/v1/decide", "application/json", `{`, 400, "bad-json", "/openapi.json"},
		{"unknown-field", "POST", "/v1/decide", "application/json", `{"hosts":["a.example"]}`, 400, "bad-json", `unknown field "hosts"`},
		{"two-values", "POST", "/v1/decide", "application/json", `{"deliveries":[{"host":"a.example"}]} {}`, 400, "bad-json", "more than one"},
		{"empty", "POST", "/v1/decide", "application/json", `{"deliveries":[]}`, 400, "empty", "at least one"},
		{"too-many", "POST", "/v1/decide", "application/json", many, 413, "too-many", "at most 10"},
		{"too-large", "POST", "/v1/decide", "application/json", `{"deliveries":[{"host":"` + strings.Repeat("a", 5000) + `"}]}`, 413, "too-large", "over 4096 bytes"},
		{"bad-host", "POST", "/v1/decide", "application/json", `{"deliveries":[{"host":"a.example"},{"host":"http://[::1"}]}`, 400, "invalid-host", "nothing was decided"},
		{"bad-time", "POST", "/v1/decide", "application/json", `{"deliveries":[{"host":"a.example","held_since":"yesterday"}]}`, 400, "bad-json", "yesterday"},
		{"text-plain", "POST", "/v1/decide", "text/plain", `{}`, 415, "unsupported-media-type", "application/json"},
		{"bad-outcome", "POST", "/v1/outcomes", "application/json", `{"outcomes":[{"host":"a.example","outcome":"ok"}]}`, 400, "invalid-outcome", "want success, reachable-failure, failure or ignore"},
		{"method", "PUT", "/v1/decide", "", ``, 405, "method-not-allowed", "use POST"},
		{"route", "GET", "/v2/nothing", "", ``, 404, "not-found", "/openapi.json"},
		{"bad-state", "GET", "/v1/circuits?state=shut", "", ``, 400, "bad-query", "want open, half-open or closed"},
		{"bad-limit", "GET", "/v1/circuits?limit=0", "", ``, 400, "bad-query", "want 1 to 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, f.url+tc.path, strings.NewReader(tc.body))
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			tok := tokWorker
			if tc.method == "GET" {
				tok = tokReader
			}
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var p problem
			if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
				t.Fatal(err)
			}
			said := p.Detail
			for _, e := range p.Errors {
				said += " " + e.Pointer + ": " + e.Detail
			}
			if resp.StatusCode != tc.status || p.Status != tc.status || resp.Header.Get("Content-Type") != "application/problem+json" ||
				p.Type != problemPrefix+tc.kind || !strings.Contains(said, tc.detail) || p.Title == "" {
				t.Errorf("%d %s %+v, want %d %s with %q", resp.StatusCode, resp.Header.Get("Content-Type"), p, tc.status, tc.kind, tc.detail)
			}
		})
	}
	if got := f.snapshot(); got != "" {
		t.Errorf("bad requests wrote records: %s", got)
	}
}

// TestTokens: the tokens file's format and its messages, which never
// quote a token.
func TestTokens(t *testing.T) {
	toks, err := ParseTokens("# comment\n\nworkers decide,report 0123456789abcdef\noncall read,reset fedcba9876543210\n", "f")
	if err != nil || len(toks) != 2 || toks[0].Perms != PermDecide|PermReport || toks[1].Perms != PermRead|PermReset {
		t.Fatalf("%+v %v", toks, err)
	}
	const secret = "secret-token-must-not-show"
	for in, want := range map[string]string{
		"a decide":          "want NAME PERMISSIONS TOKEN",
		"a write " + secret: `permission "write"`,
		"a decide short":    "at least 16",
		"a decide " + secret + "\nb read " + secret: "the same token as a",
		"a decide " + secret + " extra":             "has 4 fields",
	} {
		_, err := ParseTokens(in, "f")
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), secret) {
			t.Errorf("%q: %v, want %q and no token", in, err, want)
		}
	}
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(toks)
	if strings.Contains(buf.String(), "0123456789abcdef") {
		t.Errorf("a token encodes with its secret: %s", buf.String())
	}
}
