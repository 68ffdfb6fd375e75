package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestServeMetrics: the command's GET /metrics exports what its Breaker
// did, under the exporter's names with their unit suffixes, to a token
// with the metrics permission, and to nothing else.
func TestServeMetrics(t *testing.T) {
	const scrapeToken = "prometheus-token-0123456789"
	t.Setenv(tokensEnv, "workers decide,report "+serveToken+";prometheus metrics "+scrapeToken)
	s := startServe(t, "--backend", "memory", "--failure-threshold", "1")
	s.post(http.DefaultClient, "/v1/decide", serveToken, `{"deliveries":[{"host":"metrics.example"}]}`)
	if code, out := s.post(http.DefaultClient, "/v1/outcomes", serveToken, `{"outcomes":[{"host":"metrics.example","outcome":"failure"}]}`); code != 200 {
		t.Fatalf("outcomes: %d %v", code, out)
	}
	scrape := func(token string) (int, string) {
		req, _ := http.NewRequest("GET", s.base+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, text := scrape(scrapeToken)
	if code != 200 {
		t.Fatalf("GET /metrics: %d %s", code, text)
	}
	for _, want := range []string{
		`kvbreaker_decisions_total{kvbreaker_cached="false",kvbreaker_decision="send",`,
		`kvbreaker_transitions_total{kvbreaker_transition_from="closed",kvbreaker_transition_to="open",`,
		"# TYPE kvbreaker_store_call_duration_seconds histogram",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the scrape lacks %s:\n%s", want, text)
		}
	}
	for _, tok := range []string{"", serveToken} {
		if code, text := scrape(tok); code == 200 || strings.Contains(text, "kvbreaker_") {
			t.Errorf("GET /metrics with token %q: %d %s", tok, code, text)
		}
	}
	if code := s.shutdown(); code != exitOK {
		t.Fatalf("SIGTERM: exit %d, %v\n%s", code, s.err, s.errText.String())
	}
	if strings.Contains(s.errText.String(), scrapeToken) {
		t.Errorf("the output shows the metrics token:\n%s", s.errText.String())
	}
}
