package otelkvbreaker

import (
	"context"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// BenchmarkAllowClosed: a closed Allow over the memory store (one Get per
// call, no cache), without an Observer and with this package's over no-op
// and SDK providers.
//
//	go test -run '^$' -bench AllowClosed -benchmem -count 6 .
func BenchmarkAllowClosed(b *testing.B) {
	sdkMetrics := func(b *testing.B) Option {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		b.Cleanup(func() { mp.Shutdown(context.Background()) })
		return WithMeterProvider(mp)
	}
	// Spans are sampled and recorded, then dropped: no processor.
	sdkTraces := func(b *testing.B) Option {
		tp := sdktrace.NewTracerProvider()
		b.Cleanup(func() { tp.Shutdown(context.Background()) })
		return WithTracerProvider(tp)
	}
	noMetrics := func(*testing.B) Option { return WithMeterProvider(metricnoop.NewMeterProvider()) }
	noTraces := func(*testing.B) Option { return WithTracerProvider(tracenoop.NewTracerProvider()) }
	for _, bc := range []struct {
		name string
		opts []func(*testing.B) Option // nil: no Observer
	}{
		{"none", nil},
		{"noop", []func(*testing.B) Option{noMetrics, noTraces}},
		// The global providers before the program installs any: spans are
		// started (non-recording) since the global one may be set later.
		{"global-unset", []func(*testing.B) Option{}},
		{"sdk-metrics", []func(*testing.B) Option{sdkMetrics, noTraces}},
		{"sdk-metrics+traces", []func(*testing.B) Option{sdkMetrics, sdkTraces}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := kvbreaker.Settings{}
			if bc.opts != nil {
				var opts []Option
				for _, o := range bc.opts {
					opts = append(opts, o(b))
				}
				s.Observer = must(New(opts...))
			}
			br := must(kvbreaker.New(memory.New(), s))
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if v, _ := br.Allow(ctx, "inbox.example", time.Time{}); v.Decision != kvbreaker.Send {
					b.Fatal(v.Decision)
				}
			}
		})
	}
}
