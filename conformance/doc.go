// Package conformance is kvbreaker's public test suite for driver.Store
// adapters: Run for go test, Check and Measure (one case loop behind all
// three) for live stores (kvbreaker check).
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
// SkewedStoreMaker, AnswerDropper with package faultproxy, ForeignPlanter,
// Describer) widen what is verified, and the report lists what was not.
package conformance
