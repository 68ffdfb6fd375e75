// Package bench compares kvbreaker's decisions with sony/gobreaker's
// in-process two-step breaker and its distributed breaker, over in-process
// memory stores, in one `go test -bench` run:
//
//	go test ./bench -run '^$' -bench . -benchmem
//
// gobreaker's breaker is one circuit, not one per host; the benchmarks use a
// single host so the comparison is like for like.
package bench
