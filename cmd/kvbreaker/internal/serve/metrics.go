package serve

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/otelkvbreaker"
)

// Metrics holds the Breaker's OpenTelemetry instruments (otelkvbreaker's)
// and serves them in the Prometheus text format at GET /metrics. Give
// Observer() to the Breaker's Settings (compose it with Stats.Observer
// through kvbreaker.ComposeObservers) and the Metrics to Config.
type Metrics struct {
	obs     *kvbreaker.Observer
	mp      *sdkmetric.MeterProvider
	handler http.Handler
}

// NewMetrics returns Metrics with a registry of their own, so that a
// scrape shows the Breaker's instruments and the exporter's target_info,
// nothing of the process. It starts no spans: a span carries the delivery
// host, and serve has nowhere to send one.
func NewMetrics() (*Metrics, error) {
	reg := prometheus.NewRegistry()
	mp, err := newPromProvider(reg)
	if err != nil {
		return nil, err
	}
	obs, err := otelkvbreaker.New(otelkvbreaker.WithMeterProvider(mp), otelkvbreaker.WithTracerProvider(tracenoop.NewTracerProvider()))
	if err != nil {
		_ = mp.Shutdown(context.Background())
		return nil, fmt.Errorf("serve: the OpenTelemetry observer: %w", err)
	}
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return &Metrics{obs: obs, mp: mp, handler: h}, nil
}

// Observer is what the Breaker reports to.
func (m *Metrics) Observer() *kvbreaker.Observer { return m.obs }

// Shutdown stops the meter provider; a scrape after it shows nothing.
func (m *Metrics) Shutdown(ctx context.Context) error { return m.mp.Shutdown(ctx) }

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Metrics == nil {
		writeProblem(w, http.StatusNotFound, "metrics-off", "this server exports no metrics: give Config.Metrics (kvbreaker serve always does)")
		return
	}
	s.cfg.Metrics.handler.ServeHTTP(w, r)
}

// newPromProvider is a meter provider whose instruments reg exports,
// named as a scrape of GET /metrics names them (the dashboard test
// learns the names from it).
func newPromProvider(reg prometheus.Registerer) (*sdkmetric.MeterProvider, error) {
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("serve: the Prometheus exporter: %w", err)
	}
	return sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter)), nil
}
