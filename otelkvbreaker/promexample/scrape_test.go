package promexample_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/internal/leakcheck"
	"github.com/kvbreaker/kvbreaker/otelkvbreaker"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// TestScrape serves the exporter's registry with promhttp on 127.0.0.1 and
// checks the metric names, types and values a scrape returns after a short
// scenario.
func TestScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	obs, err := otelkvbreaker.New(otelkvbreaker.WithMeterProvider(mp), otelkvbreaker.WithTracerProvider(tracenoop.NewTracerProvider()))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	b, err := kvbreaker.New(memory.New(memory.WithClock(clock)), kvbreaker.Settings{FailureThreshold: 2, HoldLimit: time.Hour, Clock: clock, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const host = "inbox.example"
	b.Allow(ctx, host, time.Time{})
	for range 2 {
		if err := b.Failure(ctx, host); err != nil {
			t.Fatal(err)
		}
	}
	b.Allow(ctx, host, time.Time{})
	b.Allow(ctx, host, now.Add(-2*time.Hour))
	obs.ClockOffset(ctx, kvbreaker.ClockOffset{Offset: -1500 * time.Millisecond, Uncertainty: 250 * time.Millisecond})

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("server at %s, want 127.0.0.1", srv.URL)
	}
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %d %v", resp.StatusCode, err)
	}
	text := string(body)
	// The exporter adds the scope's labels to every series.
	scope := `otel_scope_name="` + otelkvbreaker.ScopeName + `",otel_scope_schema_url="",otel_scope_version=""`
	for _, want := range []string{
		"# TYPE kvbreaker_decisions_total counter",
		`kvbreaker_decisions_total{kvbreaker_cached="false",kvbreaker_decision="send",` + scope + `} 1`,
		`kvbreaker_decisions_total{kvbreaker_cached="false",kvbreaker_decision="hold",` + scope + `} 1`,
		`kvbreaker_decisions_total{kvbreaker_cached="false",kvbreaker_decision="drop",` + scope + `} 1`,
		"# TYPE kvbreaker_transitions_total counter",
		`kvbreaker_transitions_total{kvbreaker_transition_from="closed",kvbreaker_transition_to="open",` + scope + `} 1`,
		"# TYPE kvbreaker_outcomes_total counter",
		`kvbreaker_outcomes_total{kvbreaker_outcome="failure",` + scope + `} 2`,
		"# TYPE kvbreaker_drops_total counter",
		`kvbreaker_drops_total{` + scope + `} 1`,
		"# TYPE kvbreaker_store_call_duration_seconds histogram",
		`kvbreaker_store_call_duration_seconds_count{kvbreaker_store_operation="get",kvbreaker_store_outcome="not_found",` + scope + `} 1`,
		`kvbreaker_store_call_duration_seconds_count{kvbreaker_store_operation="get",kvbreaker_store_outcome="ok",` + scope + `} 1`,
		`kvbreaker_store_call_duration_seconds_count{kvbreaker_store_operation="compare_and_swap",kvbreaker_store_outcome="ok",` + scope + `} 2`,
		`kvbreaker_store_call_duration_seconds_bucket{kvbreaker_store_operation="get",kvbreaker_store_outcome="ok",` + scope + `,le="0.0001"}`,
		`kvbreaker_store_call_duration_seconds_bucket{kvbreaker_store_operation="get",kvbreaker_store_outcome="ok",` + scope + `,le="10"}`,
		"# TYPE kvbreaker_clock_offset_seconds gauge",
		`kvbreaker_clock_offset_seconds{` + scope + `} -1.5`,
		`kvbreaker_clock_uncertainty_seconds{` + scope + `} 0.25`,
	} {
		if !strings.Contains(text, want+"\n") && !strings.Contains(text, want+" ") {
			t.Errorf("scrape lacks %s", want)
		}
	}
	// Nothing that was not used is exported: no conflict, no cache hit, no
	// abandoned probe.
	for _, absent := range []string{"kvbreaker_store_conflicts_total{", "kvbreaker_cache_hits_total{", "kvbreaker_probes_abandoned_total{", host} {
		if strings.Contains(text, absent) {
			t.Errorf("scrape has %s", absent)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^kvbreaker_`).FindAllString(text, -1)); n < 10 {
		t.Errorf("%d kvbreaker_ series scraped:\n%s", n, text)
	}
	if t.Failed() {
		t.Logf("scraped:\n%s", text)
	}
}
