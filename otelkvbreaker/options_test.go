package otelkvbreaker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/internal/leakcheck"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// TestNewInvalidOptions: every bad option is named in one error.
func TestNewInvalidOptions(t *testing.T) {
	_, err := New(WithMeterProvider(nil), WithTracerProvider(nil), nil,
		WithAttributes(attribute.String("pool", "mail"), attribute.KeyValue{}, DecisionKey.String("send"), HostKey.String("a.example"), AnomalyKey.String("future"), DeliveryOutcomeKey.String("success"), ReleasedKey.Bool(true)))
	if err == nil {
		t.Fatal("New with invalid options: no error")
	}
	for _, want := range []string{"otelkvbreaker: invalid options", "WithMeterProvider: nil", "WithTracerProvider: nil", "nil Option", `invalid attribute ""`, `"kvbreaker.decision" is set by otelkvbreaker`, `"kvbreaker.host" is set by otelkvbreaker`, `"kvbreaker.record.anomaly" is set by otelkvbreaker`, `"kvbreaker.outcome" is set by otelkvbreaker`, `"kvbreaker.probe.released" is set by otelkvbreaker`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "pool") {
		t.Errorf("error %q rejects the valid attribute pool", err)
	}
	// The control: the same options without the bad ones are accepted.
	if _, err := New(WithMeterProvider(metricnoop.NewMeterProvider()), WithTracerProvider(tracenoop.NewTracerProvider()), WithAttributes(attribute.String("pool", "mail"))); err != nil {
		t.Fatalf("valid options: %v", err)
	}
}

// TestWithAttributes: the constant attributes are on every metric point.
func TestWithAttributes(t *testing.T) {
	obs, reader, _ := newTestObserver(t, WithAttributes(attribute.String("pool", "mail")))
	b := must(kvbreaker.New(memory.New(), kvbreaker.Settings{FailureThreshold: 1, Observer: obs}))
	ctx := context.Background()
	b.Allow(ctx, host, time.Time{})
	if err := b.Failure(ctx, host); err != nil {
		t.Fatal(err)
	}
	obs.ClockOffset(ctx, kvbreaker.ClockOffset{Offset: time.Second})
	got := points(t, reader)
	if len(got) != 7 { // decision, outcome, transition, 2 store calls, 2 gauges
		t.Errorf("%d points, want 7:\n%s", len(got), strings.Join(got, "\n"))
	}
	for _, p := range got {
		if !strings.Contains(p, "pool=mail") {
			t.Errorf("point without pool=mail: %s", p)
		}
	}
}

// TestNoopTracer: with a noop TracerProvider no span is started, so the
// store sees the caller's context; metrics are still recorded.
func TestNoopTracer(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	obs := must(New(WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))), WithTracerProvider(tracenoop.NewTracerProvider())))
	store := &spanSeer{Store: memory.New()}
	b := must(kvbreaker.New(store, kvbreaker.Settings{Observer: obs}))
	b.Allow(context.Background(), host, time.Time{})
	if len(store.seen) != 1 || store.seen[0].IsValid() {
		t.Errorf("store saw span contexts %v, want one invalid (no span)", store.seen)
	}
	got := points(t, reader)
	if len(got) != 2 || !strings.HasPrefix(got[0], "kvbreaker.decisions{") || !strings.Contains(got[1], "count=1") {
		t.Errorf("points %q, want one decision and one store call", got)
	}
}

// TestGlobalProviders: without options the Observer follows the global
// providers, also those installed after it was made, as a program that
// builds its Breaker before its SDK does.
func TestGlobalProviders(t *testing.T) {
	obs := must(New())
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	otel.SetMeterProvider(mp)
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetMeterProvider(metricnoop.NewMeterProvider())
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
	})
	b := must(kvbreaker.New(memory.New(), kvbreaker.Settings{Observer: obs}))
	b.Allow(context.Background(), host, time.Time{})
	if got := points(t, reader); len(got) != 2 {
		t.Errorf("points %q, want a decision and a store call", got)
	}
	if s := spans.Ended(); len(s) != 1 || s[0].Name() != "kvbreaker.store get" || s[0].SpanKind() != trace.SpanKindClient {
		t.Errorf("spans %v, want one kvbreaker.store get", s)
	}
}

// TestAllowAllocations: a closed Allow over the memory store allocates
// nothing in the Observer over no-op providers, nor with the metric SDK
// (spans off).
func TestAllowAllocations(t *testing.T) {
	for _, tc := range []struct {
		name string
		mp   func(t *testing.T) Option
	}{
		{"noop", func(*testing.T) Option { return WithMeterProvider(metricnoop.NewMeterProvider()) }},
		{"sdk-metrics", func(t *testing.T) Option {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			t.Cleanup(func() { mp.Shutdown(context.Background()) })
			return WithMeterProvider(mp)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := must(New(tc.mp(t), WithTracerProvider(tracenoop.NewTracerProvider())))
			b := must(kvbreaker.New(memory.New(), kvbreaker.Settings{Observer: obs}))
			ctx := context.Background()
			b.Allow(ctx, host, time.Time{})
			// Under -race sync.Pool drops a quarter of what is put back;
			// AllocsPerRun's integer average still reads 0 then.
			if n := testing.AllocsPerRun(1000, func() { b.Allow(ctx, host, time.Time{}) }); n != 0 {
				t.Errorf("closed Allow made %v allocations per call", n)
			}
		})
	}
}

// TestConcurrent: Breakers on many goroutines share one Observer (and its
// pool of store calls); every decision and store call is counted once.
func TestConcurrent(t *testing.T) {
	obs, reader, spans := newTestObserver(t)
	store := memory.New()
	const workers, rounds = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		b := must(kvbreaker.New(store, kvbreaker.Settings{FailureThreshold: 1000, Observer: obs}))
		wg.Go(func() {
			for i := range rounds {
				h := fmt.Sprintf("h%d.example", (w+i)%5)
				b.Allow(context.Background(), h, time.Time{})
				if i%10 == 0 {
					if err := b.Failure(context.Background(), h); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	var decisions, calls int
	for _, p := range points(t, reader) {
		f := strings.Fields(p)
		switch {
		case strings.HasPrefix(p, "kvbreaker.decisions{"):
			decisions += atoi(t, f[1])
		case strings.HasPrefix(p, "kvbreaker.store.call.duration{"):
			calls += atoi(t, strings.TrimPrefix(f[1], "count="))
		}
	}
	if decisions != workers*rounds {
		t.Errorf("%d decisions counted, want %d", decisions, workers*rounds)
	}
	if n := len(spans.Ended()); calls != n || n < workers*rounds {
		t.Errorf("%d store calls counted, %d spans ended, want equal and at least %d", calls, n, workers*rounds)
	}
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
