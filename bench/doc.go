// Package bench measures what kvbreaker's decisions cost. It has no
// library code: everything is in its tests and benchmarks, and TestMain
// starts the real servers they need (etcd, dynalite, Miniflare, Redis,
// PostgreSQL, MariaDB and nats-server with JetStream, child processes on
// 127.0.0.1) and makes the SQLite file in a temporary directory, so nothing
// has to be set up by hand.
//
// Comparisons with sony/gobreaker v2 (its in-process two-step breaker and its
// distributed breaker over an in-memory SharedDataStore), over in-process
// memory stores, one host so the comparison is like for like:
//
//	go test ./bench -run '^$' -bench 'AllowClosed|Failure|AllowOpen' -benchmem
//
// Over the real backends, Allow on a closed host against a raw Get of the
// same store (BenchmarkRealAllow, BenchmarkRealGet), side by side:
//
//	go test ./bench -run '^$' -bench Real -benchmem -count 6 > real.txt
//	go tool benchstat -col .name -filter '.name:(RealGet OR RealAllow)' real.txt
//
// Tests that assert the targets and print their tables with -v:
// TestRoundTrips (store calls and requests on the wire per operation, with a
// counting gRPC interceptor for etcd, a counting http.RoundTripper for
// DynamoDB and Workers KV, and for NATS a dialer that parses the client
// protocol the connection writes), TestAllowLatencyRatio (Allow over Get, medians of
// interleaved samples), TestContention (64 workers failing on one host over
// every store with compare-and-swap: one closed→open transition, conflicts
// per failure) and
// TestRecordSizeAndLeases (encoded record size, etcd lease grants per 1,000
// writes). RESULTS.md has the figures of one run and the commands.
//
// The host-mix benchmarks (thousands of hosts, serial and parallel, against
// gobreaker's per-host breakers) are in bench/hostmix, which starts no
// servers so that nothing else runs while it measures.
package bench
