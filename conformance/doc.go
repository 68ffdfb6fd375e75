// Package conformance is kvbreaker's public test suite for core.Store
// adapters: call Run from your adapter's _test.go with a HarnessMaker that
// makes fresh, isolated stores. Check runs the same cases without a
// *testing.T (kvbreaker check uses it on live stores) and Measure also
// returns what it measured.
package conformance
