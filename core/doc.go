// Package core is kvbreaker's per-host circuit breaker: a record, a pure
// timed state machine over it, the contract a key-value store implements,
// and Breaker, which runs the machine over a store shared by a fleet.
//
// Per host the store keeps one small record (see Record): the failure
// instants that still count, the instant deliveries are restrained until, and
// one bit saying a half-open probe is in flight. The state (closed, open,
// half-open) is derived from it, and so is the record's time to live
// (Config.StateTTL), so a record neither leaks nor expires before it can
// matter.
//
// The pure transitions (AllowStep, FailureStep, SuccessStep) take the record,
// the current instant and a Config and return the next record and decision.
// They do no I/O and read no clock; Breaker reads its clock once per call,
// reads the record, applies a transition and writes it back with a
// compare-and-swap, retrying a bounded number of times when another worker
// wrote first.
package core
