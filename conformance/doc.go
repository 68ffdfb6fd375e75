// Package conformance is kvbreaker's public test suite for core.Store
// adapters: Run for go test, Check and Measure for live stores (kvbreaker
// check). The text below is also in ADAPTERS.md.
//
// # Writing a store adapter
//
// kvbreaker keeps one small record per host in a key-value store you already run. To use another
// store, implement core.Store, declare what it does in Traits(), and let the conformance suite
// hold it to that declaration. Your package imports core (and conformance, skew in tests);
// it never needs the other backends.
//
// # 1. Implement core.Store
//
//	type Store interface {
//		Get(ctx context.Context, key string) ([]byte, core.Version, error)
//		CompareAndSwap(ctx context.Context, key string, old core.Version, value []byte, ttl time.Duration) (core.Version, error)
//		CompareAndDelete(ctx context.Context, key string, old core.Version) error
//		Traits() core.Traits
//	}
//
// Breaker guarantees: keys pass core.ValidateKey (UTF-8, 1–256 bytes, no control characters),
// ttl > 0, values are a few hundred bytes. You owe:
//
//   - Versions are opaque, never core.NoVersion for a present key, new on every write (even of
//     the same bytes) and never reused for a key, not even after a delete or expiry: a worker holding
//     an old version must never overwrite a newer record.
//   - Create-only: CompareAndSwap(key, core.NoVersion, …) succeeds only when the key is absent.
//   - Conflicts (version mismatch) return an error matching core.ErrConflict; preferably a
//     *core.ConflictError carrying the key's real current value and version (NoVersion if
//     absent), which saves Breaker a read.
//   - Deletes: CompareAndDelete of an absent key returns core.ErrNotFound.
//   - Expiry: an entry whose TTL has passed is absent for Get, CompareAndSwap and
//     CompareAndDelete, even if the backend has not deleted it yet.
//   - Keys are escaped reversibly for your backend: a/b, a%2Fb, a b, a+b, .., Host and
//     host, and 256-byte keys of multi-byte runes must stay distinct and round-trip.
//   - Every write replaces the TTL: an update lives for the TTL it was written with, longer or
//     shorter than the creating write's. Round a TTL up to your unit, never down or to a cap.
//   - Lost answers: a write the backend applied but whose answer was lost (a retry) is a success;
//     if you cannot tell, return an error matching neither core.ErrConflict nor core.ErrNotFound.
//   - Context: a call with an already ended context fails with an error matching ctx.Err() and
//     writes nothing; one that ends mid-call leaves the outcome unknown: return an error matching
//     ctx.Err(). Other errors read <backend>: <op> <key>: <cause> (op: get, put, delete), wrap
//     the cause, and never include credentials.
//
// # 2. Declare Traits
//
//	field | declare | the suite checks
//	Atomic | false if compares are not real (last writer wins) | atomic stores: conflicts, linearizability under concurrent CAS (porcupine), no lost update
//	Expiry.Kind | ExpiryRelative (server counts the TTL) or ExpiryReaderFiltered (absolute instant, filtered by the reader's clock) | margin formula
//	Expiry.Granularity | unit TTLs/instants are quantised to (assume the worst: rounding down) | entry not gone before TTL − Early − Granularity
//	Expiry.MinTTL | shortest TTL granted | expiry measured with max(MinTTL, 2 s)
//	Expiry.Early / Late | how far before / after the TTL an entry may vanish (reader-filtered: Late is physical deletion only) | gone by TTL + Granularity (+ Late if relative)
//	ReadStaleness | how long a write may stay invisible to Get (0: linearizable) | measured; exceeding it fails
//	MinWriteInterval | per-key write rate limit | the suite paces its writes by it
//
// The record's TTL margin follows from this: core.ExpiryModel.RequiredMargin(δ) =
// Early + max(Granularity, 1 ms), plus 2δ for relative expiry, for a fleet clock-skew bound δ.
// Under-declaring is the dangerous mistake: a record that expires before its restraint ends turns
// the half-open probe into a plain send.
//
// # 3. Write a Harness and call Run
//
//	type harness struct{ client *mykv.Client }
//
//	// MakeStore returns a store over a fresh, empty keyspace (a unique prefix or table).
//	func (h *harness) MakeStore(ctx context.Context) (core.Store, error) {
//		return mystore.New(h.client, mystore.WithPrefix(rand.Text()+"/")), nil
//	}
//	func (h *harness) Close() { h.client.Close() }
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, func(ctx context.Context, t *testing.T) (conformance.Harness, error) {
//			client, err := startLocalServer(ctx, t) // a real server on 127.0.0.1, stopped in TestMain
//			return &harness{client}, err
//		})
//	}
//
// Every case is a named subtest (go test -run TestConformance/expiry) with a deadline from
// t.Context(). A store with Atomic == false skips the compare cases with a t.Skipf naming the
// trait. Cases that wait for real expiry are skipped under -short unless your harness also
// implements conformance.TimeAdvancer (Advance(ctx, d) must move every clock the store judges
// expiry by: the emulator's and the adapter's). RunOptions sets the concurrent-CAS goroutines and
// iterations (the check finds no false violations but can miss a race that did not happen: raise
// Iterations and use -race), the expiry TTL and the clock skew δ.
//
// Optional harness capabilities widen what is verified (without them the report says "not
// verified"): LifetimeReporter (a key's remaining physical lifetime: etcd LeaseTimeToLive,
// DynamoDB's purge attribute, Workers KV's expiration, Redis PTTL) checks expiry at the default
// StateTTL without waiting; SkewedStoreMaker, with TimeAdvancer, checks padded stores for a
// reader MaxClockSkew behind; AnswerDropper (a conformance/faultproxy between client and server)
// checks writes whose answer was lost; Describer names the store when it does not answer. A store
// that does not answer within Options.ReachTimeout fails the first case and the rest are skipped.
//
// The suite also runs three Breakers with clocks ±δ apart over your store (open, hold, a single
// probe, reopen, close), and, in simulated time, the margin experiment of package skew over your
// declared traits: at the required margin no probe may be demoted.
//
// # 4. Check a live store
//
// conformance.Check(ctx, h) runs the same cases without a *testing.T and returns every violation
// joined, each naming the promise it breaks ("an expired entry must count as absent for
// CompareAndSwap: …"). conformance.Measure(ctx, h, opts) also returns a *Report: per-case
// pass/fail/skip, expiry measured against the declared model (how early or late), the read staleness
// seen, round-trip p50/p99, and TTLMarginFor(δ), the margin a fleet needs for clock skew δ. Point
// the harness at a key prefix of its own.
//
// # 5. Backends in this repository
//
// Each backend has an expiry profile in package skew (skew.Memory, skew.Etcd,
// skew.DynamoDB, skew.WorkersKV), from which the margin experiment derives the worst distortion
// its traits allow. skew does not import the backends; instead each backend's test asserts that
// its store's Traits() (default options) equal its profile's, so the two cannot drift apart:
//
//	if got, want := store.Traits(), skew.Etcd.Traits; got != want {
//		t.Fatalf("Traits() = %+v, skew.Etcd declares %+v: update one of them", got, want)
//	}
package conformance
