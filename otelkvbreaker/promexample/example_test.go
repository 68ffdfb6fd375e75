package promexample_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/otelkvbreaker"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// Example exports a Breaker's metrics to Prometheus: the OTel Prometheus
// exporter is the MeterProvider's reader, and promhttp serves its registry.
func Example() {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		log.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())
	obs, err := otelkvbreaker.New(otelkvbreaker.WithMeterProvider(mp), otelkvbreaker.WithTracerProvider(tracenoop.NewTracerProvider()))
	if err != nil {
		log.Fatal(err)
	}

	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	b, err := kvbreaker.New(memory.New(memory.WithClock(clock)), kvbreaker.Settings{FailureThreshold: 2, Clock: clock, Observer: obs})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	b.Allow(ctx, "inbox.example", time.Time{})
	b.Failure(ctx, "inbox.example")
	b.Failure(ctx, "inbox.example")
	b.Allow(ctx, "inbox.example", time.Time{})

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		if l := sc.Text(); strings.HasPrefix(l, "kvbreaker_decisions_total") || strings.HasPrefix(l, "kvbreaker_transitions_total") || strings.HasPrefix(l, "kvbreaker_store_call_duration_seconds_count") {
			fmt.Println(l)
		}
	}
	// Output:
	// kvbreaker_decisions_total{kvbreaker_cached="false",kvbreaker_decision="hold"} 1
	// kvbreaker_decisions_total{kvbreaker_cached="false",kvbreaker_decision="send"} 1
	// kvbreaker_store_call_duration_seconds_count{kvbreaker_store_operation="compare_and_swap",kvbreaker_store_outcome="ok"} 2
	// kvbreaker_store_call_duration_seconds_count{kvbreaker_store_operation="get",kvbreaker_store_outcome="not_found"} 1
	// kvbreaker_store_call_duration_seconds_count{kvbreaker_store_operation="get",kvbreaker_store_outcome="ok"} 1
	// kvbreaker_transitions_total{kvbreaker_transition_from="closed",kvbreaker_transition_to="open"} 1
}
