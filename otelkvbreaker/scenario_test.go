package otelkvbreaker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

const host = "inbox.example"

// stopwatch is the Observer's latency clock in tests: each reading is 1 ms
// after the previous one, so every store call lasts exactly 1 ms (when
// calls do not overlap).
type stopwatch struct {
	mu sync.Mutex
	t  time.Time
}

func (s *stopwatch) now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.t = s.t.Add(time.Millisecond)
	return s.t
}

// newTestObserver builds an Observer over a ManualReader and a
// SpanRecorder, with the stopwatch as its latency clock.
func newTestObserver(t *testing.T, opts ...Option) (*kvbreaker.Observer, *sdkmetric.ManualReader, *tracetest.SpanRecorder) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() {
		mp.Shutdown(context.Background())
		tp.Shutdown(context.Background())
	})
	sw := &stopwatch{}
	c := config{now: sw.now}
	for _, o := range append([]Option{WithMeterProvider(mp), WithTracerProvider(tp)}, opts...) {
		o(&c)
	}
	if len(c.errs) > 0 {
		t.Fatal(c.errs)
	}
	o, err := newObserver(&c)
	if err != nil {
		t.Fatal(err)
	}
	return o.hooks(), reader, spans
}

// points renders every data point the reader collects as one line,
// "name{k=v,…} value", sorted; a histogram's value is its count, sum and
// non-empty buckets by upper bound. It fails on a scope other than
// ScopeName.
func points(t *testing.T, r *sdkmetric.ManualReader) []string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []string
	attrs := func(s attribute.Set) string {
		var kv []string
		for _, a := range s.ToSlice() {
			kv = append(kv, string(a.Key)+"="+a.Value.String())
		}
		return "{" + strings.Join(kv, ",") + "}"
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, ScopeName)
		}
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if !d.IsMonotonic || d.Temporality != metricdata.CumulativeTemporality {
					t.Errorf("%s: monotonic=%v temporality=%v, want a cumulative counter", m.Name, d.IsMonotonic, d.Temporality)
				}
				for _, p := range d.DataPoints {
					out = append(out, fmt.Sprintf("%s%s %d", m.Name, attrs(p.Attributes), p.Value))
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out = append(out, fmt.Sprintf("%s%s %g", m.Name, attrs(p.Attributes), p.Value))
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if !slices.Equal(p.Bounds, DurationBuckets) {
						t.Errorf("%s: bounds %v, want DurationBuckets", m.Name, p.Bounds)
					}
					var b []string
					for i, n := range p.BucketCounts {
						if n > 0 {
							le := "+Inf"
							if i < len(p.Bounds) {
								le = fmt.Sprint(p.Bounds[i])
							}
							b = append(b, fmt.Sprintf("le%s:%d", le, n))
						}
					}
					out = append(out, fmt.Sprintf("%s%s count=%d sum=%.4f %s", m.Name, attrs(p.Attributes), p.Count, p.Sum, strings.Join(b, ",")))
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	slices.Sort(out)
	return out
}

func diff(t *testing.T, what string, got, want []string) {
	t.Helper()
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s:\ngot\n\t%s\nwant\n\t%s", what, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// spanSeer is a memory store that keeps the span each Get's context
// carries, to show the store call runs under the Observer's span.
type spanSeer struct {
	*memory.Store
	seen []trace.SpanContext
}

func (s *spanSeer) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	s.seen = append(s.seen, trace.SpanContextFromContext(ctx))
	return s.Store.Get(ctx, key)
}

// TestScenario drives Breakers through a scripted cycle and reads every
// metric back through the SDK's ManualReader, and every span through a
// SpanRecorder.
func TestScenario(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	obs, reader, spans := newTestObserver(t)
	store := &spanSeer{Store: memory.New(memory.WithClock(clock))}
	settings := kvbreaker.Settings{FailureThreshold: 2, RecoveryDelay: time.Minute, HoldLimit: time.Hour, Clock: clock, Observer: obs}
	b := must(kvbreaker.New(store, settings))
	unobserved := settings
	unobserved.Observer = nil
	other := must(kvbreaker.New(store, unobserved))
	cached := settings
	// A real-time staleness far beyond the test's run, so the second Allow
	// is answered by the cache however slow the machine.
	cached.CacheSize, cached.CacheStaleness = 10, time.Hour
	withCache := must(kvbreaker.New(store, cached))

	allow := func(b *kvbreaker.Breaker, ctx context.Context, host string, heldSince time.Time, want kvbreaker.Decision) {
		t.Helper()
		v, _ := b.Allow(ctx, host, heldSince)
		if v.Decision != want {
			t.Fatalf("Allow %s: %v, want %v", host, v.Decision, want)
		}
	}
	ok := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	allow(b, ctx, host, time.Time{}, kvbreaker.Send) // get not_found
	allow(b, ctx, host, time.Time{}, kvbreaker.Send) // get not_found
	ok(b.Failure(ctx, host))                         // cas ok
	ok(b.Failure(ctx, host))                         // cas ok, closed→open
	allow(b, ctx, host, time.Time{}, kvbreaker.Hold) // get ok
	allow(b, ctx, host, now.Add(-2*time.Hour), kvbreaker.Drop)
	now = now.Add(2 * time.Minute)
	// The probe election runs under the caller's span: the store spans are
	// its children.
	parentTP := sdktrace.NewTracerProvider()
	pctx, parent := parentTP.Tracer("test").Start(ctx, "deliver")
	allow(b, pctx, host, time.Time{}, kvbreaker.Probe) // get ok, cas ok, open→half-open
	parent.End()
	ok(b.Success(ctx, host)) // cad ok, half-open→closed
	ok(b.Failure(ctx, host)) // cas ok
	// Another worker closes the circuit behind b's back: b's next write,
	// on its stale version, conflicts and is retried.
	ok(other.Success(ctx, host))
	ok(b.Failure(ctx, host))                                             // cas conflict, cas ok
	allow(withCache, ctx, "cached.example", time.Time{}, kvbreaker.Send) // get not_found
	allow(withCache, ctx, "cached.example", time.Time{}, kvbreaker.Send) // cached
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	allow(b, canceled, host, time.Time{}, kvbreaker.Send) // get canceled (fails open)
	late, cancel := context.WithDeadline(ctx, now.Add(-time.Hour))
	defer cancel()
	allow(b, late, host, time.Time{}, kvbreaker.Send) // get timeout
	obs.ClockOffset(ctx, kvbreaker.ClockOffset{Offset: -1500 * time.Millisecond, Uncertainty: 250 * time.Millisecond, At: now})
	obs.ClockOffset(ctx, kvbreaker.ClockOffset{Offset: 2 * time.Second, Uncertainty: 500 * time.Millisecond, At: now})
	obs.RecordAnomaly(ctx, kvbreaker.AnomalyInfo{Host: host, Anomaly: "future"})
	obs.RecordAnomaly(ctx, kvbreaker.AnomalyInfo{Host: host, Anomaly: "future"})
	obs.RecordAnomaly(ctx, kvbreaker.AnomalyInfo{Host: host, Anomaly: "undecodable"})
	obs.Abandon(ctx, kvbreaker.AbandonInfo{Host: host, Released: true})
	obs.Abandon(ctx, kvbreaker.AbandonInfo{Host: host, Released: false})
	obs.Abandon(ctx, kvbreaker.AbandonInfo{Host: host, Released: true})

	call := func(op, outcome string, n int) string {
		return fmt.Sprintf("kvbreaker.store.call.duration{kvbreaker.store.operation=%s,kvbreaker.store.outcome=%s} count=%d sum=%.4f le0.001:%d", op, outcome, n, float64(n)/1000, n)
	}
	diff(t, "metrics", points(t, reader), []string{
		"kvbreaker.decisions{kvbreaker.cached=false,kvbreaker.decision=send} 5",
		"kvbreaker.decisions{kvbreaker.cached=true,kvbreaker.decision=send} 1",
		"kvbreaker.decisions{kvbreaker.cached=false,kvbreaker.decision=hold} 1",
		"kvbreaker.decisions{kvbreaker.cached=false,kvbreaker.decision=drop} 1",
		"kvbreaker.decisions{kvbreaker.cached=false,kvbreaker.decision=probe} 1",
		"kvbreaker.transitions{kvbreaker.transition.from=closed,kvbreaker.transition.to=open} 1",
		"kvbreaker.transitions{kvbreaker.transition.from=open,kvbreaker.transition.to=half-open} 1",
		"kvbreaker.transitions{kvbreaker.transition.from=half-open,kvbreaker.transition.to=closed} 1",
		"kvbreaker.drops{} 1",
		"kvbreaker.cache.hits{} 1",
		"kvbreaker.outcomes{kvbreaker.outcome=failure} 4",
		"kvbreaker.outcomes{kvbreaker.outcome=success} 1",
		"kvbreaker.probes.abandoned{kvbreaker.probe.released=true} 2",
		"kvbreaker.probes.abandoned{kvbreaker.probe.released=false} 1",
		"kvbreaker.store.conflicts{kvbreaker.store.operation=compare_and_swap} 1",
		call("get", "not_found", 3),
		call("get", "ok", 2),
		call("get", "canceled", 1),
		call("get", "timeout", 1),
		call("compare_and_swap", "ok", 5),
		call("compare_and_swap", "conflict", 1),
		call("compare_and_delete", "ok", 1),
		"kvbreaker.clock.offset{} 2",
		"kvbreaker.clock.uncertainty{} 0.5",
		"kvbreaker.record.anomalies{kvbreaker.record.anomaly=future} 2",
		"kvbreaker.record.anomalies{kvbreaker.record.anomaly=undecodable} 1",
	})

	// Spans: one per store call, in order.
	type want struct {
		name, host, outcome string
		status              codes.Code
		child               bool // of the caller's "deliver" span
	}
	var wants []want
	add := func(op, host, outcome string, status codes.Code, child bool) {
		wants = append(wants, want{"kvbreaker.store " + op, host, outcome, status, child})
	}
	add("get", host, "not_found", codes.Unset, false)
	add("get", host, "not_found", codes.Unset, false)
	add("compare_and_swap", host, "ok", codes.Unset, false)
	add("compare_and_swap", host, "ok", codes.Unset, false)
	add("get", host, "ok", codes.Unset, false)
	add("get", host, "ok", codes.Unset, true)
	add("compare_and_swap", host, "ok", codes.Unset, true)
	add("compare_and_delete", host, "ok", codes.Unset, false)
	add("compare_and_swap", host, "ok", codes.Unset, false)
	add("compare_and_swap", host, "conflict", codes.Unset, false)
	add("compare_and_swap", host, "ok", codes.Unset, false)
	add("get", "cached.example", "not_found", codes.Unset, false)
	add("get", host, "canceled", codes.Error, false)
	add("get", host, "timeout", codes.Error, false)
	ended := spans.Ended()
	if len(ended) != len(wants) {
		t.Fatalf("%d spans ended, want %d", len(ended), len(wants))
	}
	if n := len(spans.Started()); n != len(wants) {
		t.Errorf("%d spans started, want %d (each ended once)", n, len(wants))
	}
	for i, s := range ended {
		w := wants[i]
		got := map[attribute.Key]string{}
		for _, a := range s.Attributes() {
			got[a.Key] = a.Value.String()
		}
		op := strings.TrimPrefix(w.name, "kvbreaker.store ")
		if s.Name() != w.name || s.SpanKind() != trace.SpanKindClient || got[HostKey] != w.host || got[OperationKey] != op || got[OutcomeKey] != w.outcome || len(got) != 3 {
			t.Errorf("span %d: %s kind %v attributes %v, want %s (client) host %s outcome %s", i, s.Name(), s.SpanKind(), got, w.name, w.host, w.outcome)
		}
		if s.Status().Code != w.status {
			t.Errorf("span %d %s %s: status %v, want %v", i, s.Name(), w.outcome, s.Status().Code, w.status)
		}
		if w.status == codes.Error && (len(s.Events()) != 1 || s.Events()[0].Name != "exception") {
			t.Errorf("span %d %s: events %v, want the error recorded", i, s.Name(), s.Events())
		}
		if isChild := s.Parent().SpanID() == parent.SpanContext().SpanID(); isChild != w.child || s.Parent().TraceID().IsValid() != w.child {
			t.Errorf("span %d %s: parent %v, want a child of deliver: %v", i, s.Name(), s.Parent().SpanID(), w.child)
		}
		if s.InstrumentationScope().Name != ScopeName {
			t.Errorf("span %d: scope %q", i, s.InstrumentationScope().Name)
		}
	}
	// The store ran each Get under that Get's span.
	var gets []trace.SpanContext
	for _, s := range ended {
		if s.Name() == "kvbreaker.store get" {
			gets = append(gets, s.SpanContext())
		}
	}
	// other's (unobserved) Get in its Success is the one extra.
	if len(store.seen) != len(gets)+1 {
		t.Fatalf("store saw %d gets, spans %d (+1 unobserved)", len(store.seen), len(gets))
	}
	seen := slices.DeleteFunc(slices.Clone(store.seen), func(sc trace.SpanContext) bool { return !sc.IsValid() })
	if len(seen) != len(gets) {
		t.Fatalf("%d gets carried a span, want %d", len(seen), len(gets))
	}
	for i := range gets {
		if !seen[i].Equal(gets[i]) {
			t.Errorf("get %d ran under span %v, want its own %v", i, seen[i].SpanID(), gets[i].SpanID())
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
