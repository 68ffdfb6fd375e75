// Package skew simulates what clocks and stores do to a kvbreaker record,
// as wrappers usable in any test.
//
// Clocks: a true time (a Manual clock, or time.Now inside a testing/synctest
// bubble, which SystemTime wraps) and per-worker Clocks over it with an
// offset and a drift, clamped to a skew bound δ (Fleet draws a fleet of
// them, favouring the extremes ±δ where the worst cases are).
//
// Stores: New wraps a real driver.Store (any adapter; simulations use
// backends/memory on the true clock) with a Distortion: TTLs quantised to
// a granularity (Floor or Ceil), a minimum TTL, expiry up to Early early and
// Late late, judged by the server's clock (relative TTLs) or by each
// reader's own clock against an instant the writer's clock set
// (reader-filtered), reads up to Staleness stale, a per-key write rate
// limit (ErrRateLimited), and last-writer-wins compares. Each worker reaches
// the shared store through a View with its own clock.
//
// Profiles: Memory, Etcd, DynamoDB, WorkersKV, Redis, PostgreSQL, MySQL and SQLite hold the traits each
// backend's adapter declares with default options (its DefaultTraits);
// FromTraits turns traits into the worst distortion they allow. Memory is
// built from memory.DefaultTraits; skew cannot import the other backends
// (nested modules that import this one), so each backend's test asserts
// that its DefaultTraits equal its profile here and that a Store with
// default options declares them.
//
// The margin experiment (MarginSim, DESIGN §2): Breakers with skewed clocks
// share a distorted store; one opens a host's circuit, and another, holding
// a message for that host, comes back exactly when its own clock reaches the
// restraint's end. If the record has expired by then, that worker sends
// instead of probing: the half-open probe is demoted to a plain send, and a
// failure of that send only re-accumulates instead of reopening the circuit
// at once. With TTLMargin = RequiredMargin(δ) no probe is demoted, for every
// profile; one millisecond less and demotions appear (TestMarginKeepsProbes).
package skew
