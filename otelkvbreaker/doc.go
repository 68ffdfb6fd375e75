// Package otelkvbreaker reports what a kvbreaker.Breaker does through
// OpenTelemetry: metrics for its decisions, delivery outcomes, transitions,
// drops, abandoned probes, cache hits, store calls and clock offset, and a
// client span around each store call.
//
// It uses only the OpenTelemetry API (go.opentelemetry.io/otel/metric and
// go.opentelemetry.io/otel/trace); the program chooses the SDK and exporter.
// New returns a *kvbreaker.Observer for kvbreaker.Settings.Observer:
//
//	obs, err := otelkvbreaker.New(otelkvbreaker.WithMeterProvider(mp))
//	if err != nil { … }
//	b, err := kvbreaker.New(store, kvbreaker.Settings{Observer: obs})
//
// To watch a Breaker with hooks of the program's own as well, compose the
// two: Settings{Observer: kvbreaker.ComposeObservers(obs, mine)}.
//
// Without options the global providers (otel.GetMeterProvider,
// otel.GetTracerProvider) are used, as the contrib instrumentations do: they
// record nothing until the program installs an SDK. Pass
// WithTracerProvider(noop.NewTracerProvider()) (go.opentelemetry.io/otel/trace/noop)
// to turn spans off entirely; the Observer then starts none.
//
// The instrumentation scope is ScopeName with the module's version.
//
// # Metrics
//
// No metric carries the delivery host: a fleet delivers to thousands of
// hosts, and one time series per host would be unbounded. The host is on the
// spans instead.
//
//	name                          kind            unit         attributes
//	kvbreaker.decisions           Int64Counter    {decision}   kvbreaker.decision, kvbreaker.cached
//	kvbreaker.outcomes            Int64Counter    {delivery}   kvbreaker.outcome
//	kvbreaker.transitions         Int64Counter    {transition} kvbreaker.transition.from, kvbreaker.transition.to
//	kvbreaker.drops               Int64Counter    {message}    (none)
//	kvbreaker.probes.abandoned    Int64Counter    {probe}      kvbreaker.probe.released
//	kvbreaker.cache.hits          Int64Counter    {decision}   (none)
//	kvbreaker.store.call.duration Float64Histogram s           kvbreaker.store.operation, kvbreaker.store.outcome
//	kvbreaker.store.conflicts     Int64Counter    {conflict}   kvbreaker.store.operation
//	kvbreaker.clock.offset        Float64Gauge    s            (none)
//	kvbreaker.clock.uncertainty   Float64Gauge    s            (none)
//	kvbreaker.record.anomalies    Int64Counter    {record}     kvbreaker.record.anomaly
//	kvbreaker.mirror.lag          Float64Histogram s           (none)
//	kvbreaker.mirror.healthy      Int64Gauge      1            (none)
//	kvbreaker.mirror.transitions  Int64Counter    {transition} kvbreaker.mirror.healthy, kvbreaker.mirror.reason
//
// Attribute values:
//
//   - kvbreaker.decision: send, hold, probe, drop (one per Allow; a drop is
//     also counted in kvbreaker.drops).
//   - kvbreaker.cached: true when the local cache (Settings.CacheSize)
//     answered without a store read (also counted in kvbreaker.cache.hits).
//   - kvbreaker.outcome: success, reachable-failure, failure: the outcome
//     a delivery recorded (Success, ReachableFailure, Failure, or Record
//     or Do with one of them), counted whether or not the store then took
//     it (a store failure shows in kvbreaker.store.call.duration).
//   - kvbreaker.probe.released: true when Breaker.Abandon gave the
//     probe's claim back, so another delivery could probe at once; false
//     when the probe had been answered or taken over, or the store failed.
//   - kvbreaker.transition.from, kvbreaker.transition.to: closed, half-open,
//     open; counted by the worker whose write made the transition, as
//     Settings.OnStateChange is.
//   - kvbreaker.store.operation: get, compare_and_swap, compare_and_delete,
//     sample_clock.
//   - kvbreaker.store.outcome: ok, not_found, conflict, timeout, canceled,
//     error.
//   - kvbreaker.record.anomaly: undecodable (a value no Breaker wrote, or
//     one a newer version did), future (written by a clock ahead by more
//     than twice ClockSkew; see kvbreaker.AnomalyInfo).
//   - kvbreaker.mirror.healthy: true when the mirror (Settings.Mirror)
//     started deciding, false when it stopped and every call reads the store.
//   - kvbreaker.mirror.reason: why (kvbreaker.MirrorInfo.Reason): synced, lost,
//     stale, over_cap, ended.
//
// kvbreaker.store.call.duration is the count of store calls as well as their
// latency (OpenTelemetry's convention for client operations: no separate
// counter), in seconds, with explicit bucket boundaries from 100 µs to 10 s
// (DurationBuckets). kvbreaker.store.conflicts counts compare-and-swap and
// compare-and-delete calls that found another version, the same calls as
// outcome=conflict in the histogram, as a counter of its own for alerting.
// kvbreaker.clock.offset is the latest estimate of how far the store's clock
// is ahead of the worker's (negative when behind) and
// kvbreaker.clock.uncertainty its bound: the true offset lies within
// offset ± uncertainty.
//
// The mirror's instruments record only with Settings.Mirror on.
// kvbreaker.mirror.healthy is 1 while the mirror decides and 0 while every
// call reads the store. kvbreaker.mirror.lag is the time from sending one of
// this worker's writes to its arrival through the mirror's feed, in seconds,
// with explicit bucket boundaries from 10 µs to 2.5 s (LagBuckets).
// Decisions the mirror answers count as kvbreaker.cache.hits.
//
// WithAttributes adds constant attributes (a worker pool's name, say) to
// every metric.
//
// # Spans
//
// Each store call gets a client span named "kvbreaker.store <operation>"
// (kvbreaker.store get, …), with kvbreaker.store.operation,
// kvbreaker.store.outcome and kvbreaker.host, the delivery host whose record
// is read or written (not server.address: that would name the store's own
// server). Its status is Error for the outcomes timeout, canceled and error;
// not_found and conflict are a store's normal answers and leave it unset.
// The span's context is the store call's, so an instrumented store client
// (otelgrpc, otelhttp) nests its spans under it.
//
// # Cost
//
// Attribute sets are built once in New, and the per-call state of a store
// call is pooled, so the Observer itself allocates nothing per measurement.
// A closed Allow over the memory store (one Get per call, no cache), 2
// vCPUs, idle, medians of 6 runs (spread at most ±6%) of
//
//	go test -run '^$' -bench AllowClosed -benchmem -count 6 .
//
//	Observer                                  time/op  allocs/op  B/op
//	none                                      195 ns   0          0
//	no-op meter and tracer providers          203 ns   0          0
//	global providers, none installed          390 ns   3          240
//	SDK MeterProvider, no-op tracer           631 ns   0          0
//	SDK MeterProvider and TracerProvider      1.98 µs  8          1168
//
// With the global providers unset, the 3 allocations are the global
// tracer's non-recording span and its context: the Observer starts a span
// since the program may install a TracerProvider later.
// WithTracerProvider(noop.NewTracerProvider()) avoids them.
// TestAllowAllocations asserts the 0 allocations of the no-op and
// SDK-metrics rows.
package otelkvbreaker
