// Package skew simulates what clocks and stores do to a kvbreaker record:
// per-worker clocks with bounded offset and drift around a simulated true
// time, and store wrappers that quantise TTLs, expire early or late, judge
// expiry by the server's or the reader's clock, serve stale reads and limit
// the write rate per key.
package skew
