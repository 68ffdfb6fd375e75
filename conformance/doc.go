// Package conformance is kvbreaker's public test suite for driver.Store
// adapters: Run for go test, Check and Measure (one case loop behind all
// three) for live stores (kvbreaker check). The text below is also in
// ADAPTERS.md.
//
// # Writing a store adapter
//
// kvbreaker keeps one small record per host in a key-value store you already run. To use another
// store, implement driver.Store, declare what it does in Traits(), and let the conformance suite
// hold it to that declaration. Your package imports driver (and conformance, skew in tests);
// it never needs the other backends, nor the user package kvbreaker except for its defaults.
//
// # 1. Implement driver.Store
//
//	type Store interface {
//		Get(ctx context.Context, key string) ([]byte, driver.Version, error)
//		CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error)
//		CompareAndDelete(ctx context.Context, key string, old driver.Version) error
//		Traits() driver.Traits
//	}
//
// Breaker guarantees: keys pass driver.ValidateKey (UTF-8, 1–256 bytes, no control characters),
// ttl > 0, values are a few hundred bytes. You owe:
//
//   - Versions are opaque, never driver.NoVersion for a present key, new on every write (even of
//     the same bytes) and never reused for a key, not even after a delete or expiry: a worker holding
//     an old version must never overwrite a newer record.
//   - Create-only: CompareAndSwap(key, driver.NoVersion, …) succeeds only when the key is absent.
//   - Conflicts (version mismatch) return an error matching driver.ErrConflict; preferably a
//     *driver.ConflictError carrying the key's real current value and version (NoVersion if
//     absent), which saves Breaker a read.
//   - Deletes: CompareAndDelete of an absent key returns driver.ErrNotFound.
//   - Expiry: an entry whose TTL has passed is absent for Get, CompareAndSwap and
//     CompareAndDelete, even if the backend has not deleted it yet.
//   - Every write replaces the TTL: an update lives for the TTL it was written with, longer or
//     shorter than the creating write's (never Redis KEEPTTL, etcd WithIgnoreLease, or an
//     UpdateItem that leaves the expiry attribute: the record would vanish while its restraint runs).
//   - Round a TTL up to your unit, never down and never to a cap: 2.5 s on a whole-second backend is
//     3 s. A backend maximum TTL below what Breaker writes (30 min 5 s by default) is a bug, not a trait.
//   - Lost answers: a write the backend applied but whose answer was lost (your client or SDK
//     retried it) is a success: a conflict whose current version is the one this call wrote, or a
//     retried delete that finds the key gone by its own first attempt, returns nil. If you cannot
//     tell, return an error that matches neither driver.ErrConflict nor driver.ErrNotFound (the
//     outcome is unknown); never report a conflict with your own write.
//   - Keys are escaped reversibly for your backend: a/b, a%2Fb, a b, a+b, .., Host and
//     host, and 256-byte keys of multi-byte runes must stay distinct and round-trip.
//   - Context: a call with an already ended context fails with an error matching ctx.Err() and
//     writes nothing. A context that ends mid-call leaves the outcome unknown (the request may have
//     been applied): return an error matching ctx.Err() and never claim the write did not happen.
//   - Errors read <backend>: <op> <key>: <cause> (return a *driver.OpError), wrap the cause
//     so errors.Is/errors.As reach it, and never include credentials.
//
// # 2. Declare Traits
//
//	field | declare | the suite checks
//	Atomic | false if compares are not real (last writer wins) | atomic stores: conflicts, linearizability under concurrent CAS (porcupine), no lost update
//	Expiry.Kind | ExpiryRelative (server counts the TTL) or ExpiryReaderFiltered (absolute instant, filtered by the reader's clock) | margin formula
//	Expiry.Granularity | unit TTLs/instants are quantised to (assume the worst: rounding down) | entry not gone before TTL − Early − Granularity
//	Expiry.MinTTL | shortest TTL granted | expiry measured with max(MinTTL, 2 s)
//	Expiry.Early / Late | how far before / after the TTL an entry may vanish. A store that hides expired keys from reads and deletes them later declares ExpiryReaderFiltered; its Late is only how long the hidden copy occupies space, and reads must drop the entry on time | gone by TTL + Granularity (+ Late if relative), at 2 s, 2.5 s at a random sub-second phase, and the default StateTTL
//	MaxClockSkew | for a store whose physical copy is padded past the logical expiry: the clock skew the padding covers (MaxClockSkewOption names the option raising it) | the physical copy outlasts the logical expiry for a reader MaxClockSkew behind
//	ReadStaleness | how long a write may stay invisible to Get (0: linearizable) | measured; exceeding it fails
//	MinWriteInterval | per-key write rate limit | the suite paces its writes by it
//
// The record's TTL margin follows from this: driver.ExpiryModel.RequiredMargin(δ) =
// Early + max(Granularity, 1 ms), plus 2δ for relative expiry, for a fleet clock-skew bound δ.
// Under-declaring is the dangerous mistake: a record that expires before its restraint ends turns
// the half-open probe into a plain send.
//
// # 3. Write a Harness and call Run
//
//	type harness struct{ client *mykv.Client }
//
//	// MakeStore returns a store over a fresh, empty keyspace (a unique prefix or table).
//	func (h *harness) MakeStore(ctx context.Context) (driver.Store, error) {
//		return kvbreaker.Prefixed(mystore.New(h.client), rand.Text()+"/")
//	}
//	func (h *harness) Close() { h.client.Close() }
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, func(ctx context.Context, t *testing.T) (conformance.Harness, error) {
//			client, err := startLocalServer(ctx, t) // a real server on 127.0.0.1, stopped in TestMain
//			return &harness{client}, err
//		}, conformance.WithIterations(100))
//	}
//
// (ExampleRun in conformance/example_test.go is the same over backends/memory, compiled by
// go test.) Every case is a subtest named by its CaseID (go test -run TestConformance/expiry)
// with a deadline from t.Context(). A store with Atomic == false skips the compare cases with a
// t.Skipf naming the trait. Cases that wait for real expiry are skipped under -short (Run reads
// testing.Short() whatever the options say) unless your harness also implements
// conformance.TimeAdvancer (Advance(ctx, d) must move every clock the store judges expiry by:
// the emulator's and the adapter's; a clock that only Advance moves gives the sharpest verdict).
// On real time those cases run concurrently, each on its own store, and their subtests come after
// the others. A panic in your store or harness fails the case it happened in
// (PromiseNoPanic), not the test binary.
//
// Options: WithGoroutines and WithIterations for the concurrent-CAS case (the check finds no
// false violations but can miss a race that did not happen: raise the iterations and use -race),
// WithExpiryTTL, WithStateTTL, WithClockSkew (the fleet's δ), WithSkipSlow, WithTimeout
// (per case), WithReachTimeout, WithTrials (the margin experiment) and WithCheckTimeout (one
// porcupine search).
//
// Optional harness capabilities widen what is verified; without them the report says not
// verified instead of passing:
//
//	capability | what it unlocks
//	TimeAdvancer | expiry on fake time, including at the default StateTTL (30 min 5 s)
//	LifetimeReporter (Lifetime(ctx, store, key): etcd LeaseTimeToLive, DynamoDB's purge attribute, Workers KV's expiration, Redis PTTL) | the physical lifetime at 30 min 5 s, after updates, and the padding of padded stores, without waiting
//	SkewedStoreMaker (with TimeAdvancer) | a reader whose clock is MaxClockSkew behind still finds a padded record it counts as live
//	AnswerDropper (put conformance/faultproxy between client and server; DropNextAnswer arms it) | a write applied but whose answer was lost is not a conflict; a Breaker counts that failure once
//	ForeignPlanter (ForeignShapes, PlantForeign(ctx, store, key, shape): write through the backend's own client what another program would leave at a key) | every such shape reads as a value with a version (or as absent) that the next write replaces, with its TTL, and a Breaker over it opens, holds and resets
//	Describer | names your store and address when it does not answer
//
// A store that does not answer within the reach timeout (5 s) fails the first case, reachable,
// naming the harness's store, and every other case is skipped. The traits case holds every store
// of the harness to the Traits of the first: it makes a second store and compares. Run logs the
// report in the parent test (go test -v shows it), and the not-verified subtest is skipped
// listing every promise not verified; a linearizability search that times out is retried on fresh
// histories and then reported inconclusive, never passed.
//
// The suite also runs three Breakers with clocks ±δ apart over your store (open, hold, a single
// probe, reopen, close). One case, margin-keeps-probes, never calls your store: it runs the
// margin experiment of package skew over your declared traits in simulated time (at the required
// margin no probe may be demoted, and one millisecond below it demotions must occur, or the
// experiment has no power). Its result has Kind == conformance.KindDeclaration, and Run logs that
// it checks the declaration, not the store.
//
// If your backend can read its server's clock, implement the optional driver.ClockSampler
// (SampleClock(ctx) (t, resolution, err): the server's true reading lies in [t, t+resolution);
// Redis TIME reads to the microsecond, an HTTP Date header to the second). A Breaker uses it
// to notice a worker clock further from the store's than Settings.ClockSkew assumes, and the
// clock-sampler case holds it to what that estimate needs, whatever the server's clock says (the
// offset itself is never judged: a live store's clock may differ from the machine's). A sample is a
// non-zero time at a resolution in (0, 1 min]; five samples spread over resolution + 0.5 s of real
// time (at most 3 s) go back by no more than their resolution, advance by the real time between
// them (within the round trips, the resolution and 250 ms of slack), and bound one offset: the
// intervals [t − received, t + resolution − sent] overlap, each widened by 15 ppm of drift; with a
// canceled context it returns an error and the zero time within 1 s. A store that does not
// implement it skips the case as not promised, not as something left unverified. The case sees the
// store MakeStore returns: a wrapper must show SampleClock exactly when the store it wraps has
// one, as kvbreaker.Prefixed does.
//
// # 4. Check a live store
//
// conformance.Check(ctx, h, opts...) runs the same cases, through the same loop, without a
// *testing.T and returns every violation joined. Each is a *conformance.Problem naming the case
// (CaseID), the promise it breaks (PromiseID) and what was seen, and wraps the promise, so
// errors.Is(err, conformance.PromiseExpiredCAS) tells whether that promise was broken. The IDs are
// stable; PromiseID.Text() says the promise in words and may be reworded.
// conformance.Measure(ctx, h, opts...) also returns a *Report: per-case Results (case and
// promise IDs, kind, skipped or not promised, problems, notes, what was not verified), expiry
// measured against the declared model (how early or late), the read staleness seen, round-trip
// p50/p99, and TTLMarginFor(δ), the margin a fleet needs for clock skew δ. kvbreaker check
// renders it. Point the harness at a key prefix of its own.
//
// # 5. Backends in this repository
//
// Each backend exports DefaultTraits(), what its Store declares with default options, and has
// an expiry profile in package skew (skew.Memory, skew.Etcd, skew.DynamoDB, skew.Redis,
// skew.PostgreSQL, skew.WorkersKV) from which the margin experiment derives the worst distortion those traits
// allow. skew.Memory is built from memory.DefaultTraits(); skew (in the root module) cannot
// import the other backends' modules, so each backend's test asserts that a default Store
// declares DefaultTraits() and that its profile equals them:
//
//	if got, want := etcd.DefaultTraits(), skew.Etcd.Traits; got != want {
//		t.Errorf("etcd.DefaultTraits() = %+v, but skew.Etcd declares %+v: update the profile", got, want)
//	}
//
// Your own adapter needs no profile in skew: skew.Profile{Name: "mykv", Traits: store.Traits()}
// runs the experiment on any declaration, and the conformance suite's margin case does so for you.
package conformance
