// Package kvbreaker is a per-host circuit breaker whose state is shared by a
// whole delivery fleet through a key-value store it already runs.
//
//	b, err := kvbreaker.New(store, kvbreaker.Settings{})
//	v, err := b.Allow(ctx, host, heldSince) // Send, Hold, Probe or Drop
//	...
//	b.Failure(ctx, host) // or Success, ReachableFailure
//
// Per host the store keeps one small record: the failure instants that still
// count, the instant deliveries are restrained until, and one bit saying a
// half-open probe is in flight. The state (closed, open, half-open) is
// derived from it, and so is the record's time to live (Breaker.StateTTL),
// so a record neither leaks nor expires before it can matter.
//
// A Breaker reads its clock, reads the record, applies a pure transition (no
// I/O, no clock) and writes the result back with a compare-and-swap,
// retrying a bounded number of times when another worker wrote first; a
// write is decided on a clock read after the record it changes. Stores are
// adapters of package driver: backends/memory here, and etcd, DynamoDB,
// Workers KV, Redis and PostgreSQL as modules of their own.
//
// Settings.Observer reports every decision, delivery outcome, transition
// and store call (the otelkvbreaker module turns them into OpenTelemetry
// metrics and spans; ComposeObservers adds a program's own hooks), and
// a Breaker checks its clock against the store's when the store can show it
// (Breaker.CheckClock).
package kvbreaker
