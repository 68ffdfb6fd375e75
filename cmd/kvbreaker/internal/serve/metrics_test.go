package serve

import (
	"net/http"
	"strings"
	"testing"
)

// TestMetricsScrape: after a decision and failures through the API, a
// scrape with a metrics token shows otelkvbreaker's instruments under the
// exporter's names, with their units as Prometheus suffixes, and no
// delivery host.
func TestMetricsScrape(t *testing.T) {
	f := newFixture(t)
	const host = "metrics-host.example"
	f.decide(`{"deliveries":[{"host":"` + host + `"}]}`)
	f.report(`{"outcomes":[{"host":"` + host + `","outcome":"failure"},{"host":"` + host + `","outcome":"failure"}]}`)
	if d := f.decide(`{"deliveries":[{"host":"` + host + `"}]}`); d.Verdicts[0].Decision != "hold" {
		t.Fatalf("after two failures: %+v, want hold", d.Verdicts[0])
	}
	code, ctype, body := f.do("GET", "/metrics", tokMetrics, "")
	if code != http.StatusOK || !strings.HasPrefix(ctype, "text/plain") {
		t.Fatalf("GET /metrics: %d %s: %s", code, ctype, body)
	}
	text := string(body)
	for _, want := range []string{
		"# TYPE kvbreaker_decisions_total counter",
		`kvbreaker_decisions_total{kvbreaker_cached="false",kvbreaker_decision="send",`,
		`kvbreaker_decisions_total{kvbreaker_cached="false",kvbreaker_decision="hold",`,
		"# TYPE kvbreaker_outcomes_total counter",
		`kvbreaker_outcomes_total{kvbreaker_outcome="failure",`,
		"# TYPE kvbreaker_transitions_total counter",
		`kvbreaker_transitions_total{kvbreaker_transition_from="closed",kvbreaker_transition_to="open",`,
		"# TYPE kvbreaker_store_call_duration_seconds histogram",
		`kvbreaker_store_call_duration_seconds_bucket{kvbreaker_store_operation="compare_and_swap",kvbreaker_store_outcome="ok",`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, `kvbreaker_outcomes_total{kvbreaker_outcome="failure",`) && !strings.HasSuffix(line, " 2") {
			t.Errorf("two failures reported, scraped %s", line)
		}
	}
	if strings.Contains(text, host) {
		t.Errorf("the scrape names the delivery host %s", host)
	}
	if t.Failed() {
		t.Logf("scraped:\n%s", text)
	}

	// Without the metrics permission, nothing of it: the answer is the
	// same problem whatever was decided.
	for _, tok := range []string{"", "not-a-token-of-this-server", tokWorker} {
		code, ctype, body := f.do("GET", "/metrics", tok, "")
		want := http.StatusUnauthorized
		if tok == tokWorker {
			want = http.StatusForbidden
		}
		if code != want || ctype != "application/problem+json" || strings.Contains(string(body), "kvbreaker_") || strings.Contains(string(body), host) {
			t.Errorf("GET /metrics with token %q: %d %s, want %d problem+json and nothing of the metrics: %s", tok, code, ctype, want, body)
		}
	}
	// A metrics token decides nothing.
	if code, _, _ := f.do("POST", "/v1/decide", tokMetrics, `{"deliveries":[{"host":"`+host+`"}]}`); code != http.StatusForbidden {
		t.Errorf("POST /v1/decide with the metrics token: %d, want 403", code)
	}
}
