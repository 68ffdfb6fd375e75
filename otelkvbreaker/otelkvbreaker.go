package otelkvbreaker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of the meter and tracer: this
// package's import path, as OpenTelemetry's contrib instrumentations name
// theirs.
const ScopeName = "github.com/kvbreaker/kvbreaker/otelkvbreaker"

// Attribute keys.
const (
	DecisionKey       = attribute.Key("kvbreaker.decision")
	CachedKey         = attribute.Key("kvbreaker.cached")
	TransitionFromKey = attribute.Key("kvbreaker.transition.from")
	TransitionToKey   = attribute.Key("kvbreaker.transition.to")
	OperationKey      = attribute.Key("kvbreaker.store.operation")
	OutcomeKey        = attribute.Key("kvbreaker.store.outcome")
	AnomalyKey        = attribute.Key("kvbreaker.record.anomaly")
	// DeliveryOutcomeKey is the outcome a delivery recorded
	// (kvbreaker.Outcome), not a store call's (OutcomeKey).
	DeliveryOutcomeKey = attribute.Key("kvbreaker.outcome")
	ReleasedKey        = attribute.Key("kvbreaker.probe.released")
	// MirrorHealthyKey and MirrorReasonKey are on
	// kvbreaker.mirror.transitions: the mirror's new state and why.
	MirrorHealthyKey = attribute.Key("kvbreaker.mirror.healthy")
	MirrorReasonKey  = attribute.Key("kvbreaker.mirror.reason")
	// HostKey is on spans only, never on metrics (see the package doc).
	HostKey = attribute.Key("kvbreaker.host")
)

// DurationBuckets are the explicit bucket boundaries, in seconds, advised for
// kvbreaker.store.call.duration: an in-process store answers in well under
// 100 µs, a store in the same zone in about a millisecond, a cross-region or
// overloaded one in tens to hundreds, and kvbreaker's default CallTimeout is 5 s.
var DurationBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// LagBuckets are the explicit bucket boundaries, in seconds, advised for
// kvbreaker.mirror.lag: from an in-process feed to a networked store's
// round trips, and past kvbreaker's default MirrorStaleness (1 s), where a
// mirror that has heard nothing stops deciding.
var LagBuckets = []float64{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}

// Version is the version of this module in the running binary, from its
// build information, or "" when that is not recorded (go run, tests). It is
// the instrumentation scope's version.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, m := range bi.Deps {
		if m.Path == ScopeName {
			if m.Replace != nil {
				return m.Replace.Version
			}
			return m.Version
		}
	}
	return ""
}

// Option configures New.
type Option func(*config)

type config struct {
	mp    metric.MeterProvider
	tp    trace.TracerProvider
	attrs []attribute.KeyValue
	now   func() time.Time // store-call latency; replaced by tests
	errs  []error
}

// WithMeterProvider sets the MeterProvider. Default: otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) {
		if mp == nil {
			c.errs = append(c.errs, errors.New("WithMeterProvider: nil MeterProvider (omit the option for the global one)"))
			return
		}
		c.mp = mp
	}
}

// WithTracerProvider sets the TracerProvider of the store-call spans.
// Default: otel.GetTracerProvider(). A noop.TracerProvider
// (go.opentelemetry.io/otel/trace/noop) turns spans off: none is started.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) {
		if tp == nil {
			c.errs = append(c.errs, errors.New("WithTracerProvider: nil TracerProvider (omit the option for the global one, or pass noop.NewTracerProvider() for no spans)"))
			return
		}
		c.tp = tp
	}
}

// WithAttributes adds attributes to every metric. They must be valid and
// must not use this package's keys; keep their values few (not the host).
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return func(c *config) {
		for _, a := range attrs {
			switch {
			case !a.Valid():
				c.errs = append(c.errs, fmt.Errorf("WithAttributes: invalid attribute %q (empty key or value type)", a.Key))
			case ownKeys[a.Key]:
				c.errs = append(c.errs, fmt.Errorf("WithAttributes: %q is set by otelkvbreaker itself", a.Key))
			default:
				c.attrs = append(c.attrs, a)
			}
		}
	}
}

var ownKeys = map[attribute.Key]bool{DecisionKey: true, CachedKey: true, TransitionFromKey: true, TransitionToKey: true, OperationKey: true, OutcomeKey: true, AnomalyKey: true, DeliveryOutcomeKey: true, ReleasedKey: true, HostKey: true, MirrorHealthyKey: true, MirrorReasonKey: true}

// The enumerations the Observer precomputes attribute sets for, in the
// order of their values (Decision, State and Outcome are small ints).
var (
	decisions        = []kvbreaker.Decision{kvbreaker.Send, kvbreaker.Hold, kvbreaker.Probe, kvbreaker.Drop}
	states           = []kvbreaker.State{kvbreaker.StateClosed, kvbreaker.StateHalfOpen, kvbreaker.StateOpen}
	deliveryOutcomes = []kvbreaker.Outcome{kvbreaker.Success, kvbreaker.ReachableFailure, kvbreaker.Failure}
	ops              = []string{"get", "compare_and_swap", "compare_and_delete", "sample_clock"}
	outcomes         = []string{"ok", "not_found", "conflict", "timeout", "canceled", "error"}
)

func opIndex(op string) int {
	switch op {
	case "get":
		return 0
	case "compare_and_swap":
		return 1
	case "compare_and_delete":
		return 2
	case "sample_clock":
		return 3
	}
	return -1
}

func outcomeIndex(o string) int {
	switch o {
	case "ok":
		return 0
	case "not_found":
		return 1
	case "conflict":
		return 2
	case "timeout":
		return 3
	case "canceled":
		return 4
	case "error":
		return 5
	}
	return -1
}

// observer holds the instruments and, for every combination of attribute
// values, the measurement options built once: passing a prebuilt option
// slice makes a measurement allocate nothing here.
type observer struct {
	decisions, transitions, drops, cacheHits, conflicts, anomalies metric.Int64Counter
	outcomes, abandoned                                            metric.Int64Counter
	duration                                                       metric.Float64Histogram
	offset, uncertainty                                            metric.Float64Gauge
	mirrorLag                                                      metric.Float64Histogram
	mirrorHealthy                                                  metric.Int64Gauge
	mirrorTransitions                                              metric.Int64Counter
	tracer                                                         trace.Tracer // nil: no spans
	now                                                            func() time.Time
	extra                                                          []attribute.KeyValue

	plain       []metric.AddOption
	plainRecord []metric.RecordOption
	decision    [4][2][]metric.AddOption
	outcome     [3][]metric.AddOption // success, reachable-failure, failure
	released    [2][]metric.AddOption // false, true
	transition  [3][3][]metric.AddOption
	conflict    [4][]metric.AddOption
	anomalyOpts [2][]metric.AddOption // undecodable, future
	call        [4][6][]metric.RecordOption
	spanName    [4]string
	spanStart   [4][]trace.SpanStartOption
	outcomeAttr [6]attribute.KeyValue

	calls sync.Pool // *call
}

// New returns an Observer for kvbreaker.Settings.Observer that records the
// Breaker's metrics and store-call spans. Invalid options make it return an
// error naming each.
func New(opts ...Option) (*kvbreaker.Observer, error) {
	c := config{now: time.Now}
	for _, o := range opts {
		if o == nil {
			c.errs = append(c.errs, errors.New("nil Option"))
			continue
		}
		o(&c)
	}
	if err := errors.Join(c.errs...); err != nil {
		return nil, fmt.Errorf("otelkvbreaker: invalid options:\n%w", err)
	}
	o, err := newObserver(&c)
	if err != nil {
		return nil, err
	}
	return o.hooks(), nil
}

// hooks is the Observer that feeds o.
func (o *observer) hooks() *kvbreaker.Observer {
	return &kvbreaker.Observer{
		Decision:      o.decide,
		Outcome:       o.recorded,
		Transition:    o.transitioned,
		Abandon:       o.abandon,
		StoreCall:     o.storeCall,
		ClockOffset:   o.clockOffset,
		RecordAnomaly: o.anomaly,
		Mirror:        o.mirror,
		MirrorLag:     o.mirrorLagged,
	}
}

func newObserver(c *config) (*observer, error) {
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	o := &observer{now: c.now, extra: c.attrs}
	version := Version()
	m := c.mp.Meter(ScopeName, metric.WithInstrumentationVersion(version))
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		i, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return i
	}
	gauge := func(name, desc string) metric.Float64Gauge {
		i, err := m.Float64Gauge(name, metric.WithUnit("s"), metric.WithDescription(desc))
		errs = append(errs, err)
		return i
	}
	o.decisions = counter("kvbreaker.decisions", "{decision}", "Allow decisions, by decision and whether the local cache answered.")
	o.transitions = counter("kvbreaker.transitions", "{transition}", "Circuit transitions written by this worker.")
	o.drops = counter("kvbreaker.drops", "{message}", "Messages dropped after being held for HoldLimit.")
	o.cacheHits = counter("kvbreaker.cache.hits", "{decision}", "Allow decisions answered without a store read: by the local cache or the mirror.")
	o.mirrorTransitions = counter("kvbreaker.mirror.transitions", "{transition}", "Times the mirror started or stopped deciding, by its new state and why.")
	o.conflicts = counter("kvbreaker.store.conflicts", "{conflict}", "Compare-and-swap and compare-and-delete calls that found another version.")
	o.outcomes = counter("kvbreaker.outcomes", "{delivery}", "Delivery outcomes recorded (Success, ReachableFailure, Failure), by outcome.")
	o.abandoned = counter("kvbreaker.probes.abandoned", "{probe}", "Probes given up by their caller (Breaker.Abandon), by whether their claim was released.")
	o.anomalies = counter("kvbreaker.record.anomalies", "{record}", "Records read that the Breaker could not use as written: undecodable, or from a clock ahead by more than twice ClockSkew.")
	var err error
	o.duration, err = m.Float64Histogram("kvbreaker.store.call.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of the Breaker's store calls, by operation and outcome."),
		metric.WithExplicitBucketBoundaries(DurationBuckets...))
	errs = append(errs, err)
	o.mirrorLag, err = m.Float64Histogram("kvbreaker.mirror.lag", metric.WithUnit("s"),
		metric.WithDescription("Time from sending one of this worker's writes to its arrival through the mirror's feed."),
		metric.WithExplicitBucketBoundaries(LagBuckets...))
	errs = append(errs, err)
	o.mirrorHealthy, err = m.Int64Gauge("kvbreaker.mirror.healthy", metric.WithUnit("1"),
		metric.WithDescription("1 while the mirror decides, 0 while every call reads the store."))
	errs = append(errs, err)
	o.offset = gauge("kvbreaker.clock.offset", "How far the store's clock is ahead of this worker's (negative: behind).")
	o.uncertainty = gauge("kvbreaker.clock.uncertainty", "Bound of the clock offset estimate: the true offset lies within offset ± uncertainty.")
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("otelkvbreaker: creating instruments: %w", err)
	}

	o.plain = o.addOpts()
	o.plainRecord = o.recordOpts()
	for i, d := range decisions {
		for j, cached := range []bool{false, true} {
			o.decision[i][j] = o.addOpts(DecisionKey.String(d.String()), CachedKey.Bool(cached))
		}
	}
	for i, out := range deliveryOutcomes {
		o.outcome[i] = o.addOpts(DeliveryOutcomeKey.String(out.String()))
	}
	for i, r := range []bool{false, true} {
		o.released[i] = o.addOpts(ReleasedKey.Bool(r))
	}
	for i, from := range states {
		for j, to := range states {
			o.transition[i][j] = o.addOpts(TransitionFromKey.String(from.String()), TransitionToKey.String(to.String()))
		}
	}
	for j, out := range outcomes {
		o.outcomeAttr[j] = OutcomeKey.String(out)
	}
	for i, a := range []string{"undecodable", "future"} {
		o.anomalyOpts[i] = o.addOpts(AnomalyKey.String(a))
	}
	for i, op := range ops {
		o.conflict[i] = o.addOpts(OperationKey.String(op))
		for j, out := range outcomes {
			o.call[i][j] = o.recordOpts(OperationKey.String(op), OutcomeKey.String(out))
		}
		o.spanName[i] = "kvbreaker.store " + op
		o.spanStart[i] = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(OperationKey.String(op))}
	}
	if _, off := c.tp.(tracenoop.TracerProvider); !off {
		o.tracer = c.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(version))
	}
	o.calls.New = func() any {
		c := &call{o: o}
		c.end = c.finish // bound once, so handing it out allocates nothing
		return c
	}
	return o, nil
}

func (o *observer) set(kvs ...attribute.KeyValue) attribute.Set {
	return attribute.NewSet(append(kvs, o.extra...)...)
}

func (o *observer) addOpts(kvs ...attribute.KeyValue) []metric.AddOption {
	return []metric.AddOption{metric.WithAttributeSet(o.set(kvs...))}
}

func (o *observer) recordOpts(kvs ...attribute.KeyValue) []metric.RecordOption {
	return []metric.RecordOption{metric.WithAttributeSet(o.set(kvs...))}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (o *observer) decide(ctx context.Context, e kvbreaker.DecisionInfo) {
	d, cached := e.Decision, e.Cached
	if i := int(d); i >= 0 && i < len(o.decision) {
		o.decisions.Add(ctx, 1, o.decision[i][b2i(cached)]...)
	} else { // a Decision newer than this package
		o.decisions.Add(ctx, 1, o.addOpts(DecisionKey.String(d.String()), CachedKey.Bool(cached))...)
	}
	if d == kvbreaker.Drop {
		o.drops.Add(ctx, 1, o.plain...)
	}
	if cached {
		o.cacheHits.Add(ctx, 1, o.plain...)
	}
}

func (o *observer) recorded(ctx context.Context, e kvbreaker.OutcomeInfo) {
	if i := int(e.Outcome); i >= 0 && i < len(o.outcome) {
		o.outcomes.Add(ctx, 1, o.outcome[i]...)
		return
	}
	o.outcomes.Add(ctx, 1, o.addOpts(DeliveryOutcomeKey.String(e.Outcome.String()))...)
}

func (o *observer) abandon(ctx context.Context, e kvbreaker.AbandonInfo) {
	o.abandoned.Add(ctx, 1, o.released[b2i(e.Released)]...)
}

func (o *observer) mirror(ctx context.Context, e kvbreaker.MirrorInfo) {
	// Rare (a feed's start, loss or staleness): options built per event.
	o.mirrorHealthy.Record(ctx, int64(b2i(e.Healthy)), o.plainRecord...)
	o.mirrorTransitions.Add(ctx, 1, o.addOpts(MirrorHealthyKey.Bool(e.Healthy), MirrorReasonKey.String(e.Reason))...)
}

func (o *observer) mirrorLagged(ctx context.Context, e kvbreaker.MirrorLagInfo) {
	o.mirrorLag.Record(ctx, e.Lag.Seconds(), o.plainRecord...)
}

func (o *observer) anomaly(ctx context.Context, e kvbreaker.AnomalyInfo) {
	switch a := e.Anomaly; a {
	case "undecodable":
		o.anomalies.Add(ctx, 1, o.anomalyOpts[0]...)
	case "future":
		o.anomalies.Add(ctx, 1, o.anomalyOpts[1]...)
	default: // an anomaly newer than this package
		o.anomalies.Add(ctx, 1, o.addOpts(AnomalyKey.String(a))...)
	}
}

func (o *observer) transitioned(ctx context.Context, e kvbreaker.TransitionInfo) {
	from, to := e.From, e.To
	if i, j := int(from), int(to); i >= 0 && i < len(o.transition) && j >= 0 && j < len(o.transition) {
		o.transitions.Add(ctx, 1, o.transition[i][j]...)
		return
	}
	o.transitions.Add(ctx, 1, o.addOpts(TransitionFromKey.String(from.String()), TransitionToKey.String(to.String()))...)
}

func (o *observer) clockOffset(ctx context.Context, c kvbreaker.ClockOffset) {
	o.offset.Record(ctx, c.Offset.Seconds(), o.plainRecord...)
	o.uncertainty.Record(ctx, c.Uncertainty.Seconds(), o.plainRecord...)
}

// call is one store call in flight. Calls are pooled: the Breaker calls
// the function StoreCall returns exactly once, after which the call is
// reused.
type call struct {
	o     *observer
	ctx   context.Context
	op    string
	start time.Time // zero: not timed
	span  trace.Span
	end   func(kvbreaker.StoreCallDoneInfo)
}

func (o *observer) storeCall(ctx context.Context, e kvbreaker.StoreCallInfo) (context.Context, func(kvbreaker.StoreCallDoneInfo)) {
	op, host := e.Op, e.Host
	timed := o.duration.Enabled(ctx)
	if !timed && o.tracer == nil && !o.conflicts.Enabled(ctx) {
		return ctx, nil
	}
	c := o.calls.Get().(*call)
	c.op = op
	if o.tracer != nil {
		if i := opIndex(op); i >= 0 {
			ctx, c.span = o.tracer.Start(ctx, o.spanName[i], o.spanStart[i]...)
		} else {
			ctx, c.span = o.tracer.Start(ctx, "kvbreaker.store "+op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(OperationKey.String(op)))
		}
		if c.span.IsRecording() {
			c.span.SetAttributes(HostKey.String(host))
		}
	}
	c.ctx = ctx
	if timed {
		c.start = o.now()
	}
	return ctx, c.end
}

func (c *call) finish(e kvbreaker.StoreCallDoneInfo) {
	out, err := e.Outcome, e.Err
	o := c.o
	i, j := opIndex(c.op), outcomeIndex(out)
	if !c.start.IsZero() {
		d := o.now().Sub(c.start).Seconds()
		if i >= 0 && j >= 0 {
			o.duration.Record(c.ctx, d, o.call[i][j]...)
		} else {
			o.duration.Record(c.ctx, d, o.recordOpts(OperationKey.String(c.op), OutcomeKey.String(out))...)
		}
	}
	if out == "conflict" {
		if i >= 0 {
			o.conflicts.Add(c.ctx, 1, o.conflict[i]...)
		} else {
			o.conflicts.Add(c.ctx, 1, o.addOpts(OperationKey.String(c.op))...)
		}
	}
	if s := c.span; s != nil {
		if s.IsRecording() {
			if j >= 0 {
				s.SetAttributes(o.outcomeAttr[j])
			} else {
				s.SetAttributes(OutcomeKey.String(out))
			}
			switch out {
			case "ok", "not_found", "conflict":
				// A store's normal answers, not failures.
			default:
				if err != nil {
					s.RecordError(err)
					s.SetStatus(codes.Error, err.Error())
				} else {
					s.SetStatus(codes.Error, out)
				}
			}
		}
		s.End()
	}
	c.ctx, c.op, c.start, c.span = nil, "", time.Time{}, nil
	o.calls.Put(c)
}
