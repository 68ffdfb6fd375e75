// Package conformance is kvbreaker's public test suite for driver.Store
// adapters: Run for go test, Check for a live store without a *testing.T
// (kvbreaker check runs the same case loop and renders what it measured).
//
// The contract it checks is package driver's (go doc -all
// github.com/kvbreaker/kvbreaker/driver); the walkthrough of writing an
// adapter and its harness, which case checks which rule, the harness
// capabilities and the upgrade notes from the core API are in
// conformance/ADAPTERS.md. In short:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, newHarness) // a Harness over a real server on 127.0.0.1
//	}
//
// Every case is a subtest named by its CaseID, and every problem wraps the
// PromiseID it breaks (errors.Is). A Harness makes a store over a fresh
// keyspace per case; optional capabilities (TimeAdvancer, LifetimeReporter,
// SkewedStoreMaker, AnswerDropper and FeedBreaker with package faultproxy,
// ForeignPlanter, Wiper, Describer) widen what is verified. A promise a Breaker relies on that a
// run could not verify fails it, unless the harness accepts the gap with
// Waive and a reason; the report lists every waiver.
package conformance
