// Package driver is the contract between kvbreaker and a key-value store:
// what an adapter implements (Store, and optionally Lister, ExpiryReader,
// Flusher, ClockSampler, Follower and io.Closer), what it declares about itself
// (Traits) and the errors it returns. Users of the breaker need none of it
// beyond passing a Store to kvbreaker.New. An adapter package imports
// driver and nothing else of kvbreaker's; its tests prove it with
// conformance.Run, whose walkthrough is conformance/ADAPTERS.md. This page
// is the whole contract; the suite holds an adapter to each rule below, and
// the rules say why.
//
// # What the caller guarantees
//
// kvbreaker.Breaker is a Store's only caller. Its keys pass ValidateKey:
// 1 to MaxKeyLen (256) bytes of UTF-8, no control characters, but any
// other byte a host name or a user's key may hold ('/', '%', ' ', '+',
// "..", upper and lower case). Its TTLs are positive; its values are a
// few hundred bytes, opaque to the store. Every call carries a context
// bounded by Settings.CallTimeout (5 s by default), unless the store
// declares Traits.InProcess.
//
// # Versions
//
// Every write of a key gets a Version that is never NoVersion, differs
// from every version the key had before (also when the write stores the
// same bytes), and is never reused for that key, not after a delete and
// not after an expiry. A worker that read version v and writes with
// CompareAndSwap(key, v, …) must never overwrite a record written after v:
// if a delete and a re-create could bring v back, it would. A backend
// revision that only grows (etcd's ModRevision), a sequence (PostgreSQL), a
// random 64-bit number (DynamoDB), or max(previous + 1, the server's clock
// in microseconds) kept across deletes by a tombstone (Redis) all qualify;
// a per-key counter that starts again at 1 after a delete does not.
//
// # Compare-and-swap and compare-and-delete
//
// CompareAndSwap(key, NoVersion, …) creates key only if it is absent
// (create-only); CompareAndSwap(key, v, …) writes only if the key's current
// version is v. CompareAndDelete(key, v) deletes only if the current
// version is v, and returns ErrNotFound if the key is absent. A version
// mismatch returns an error matching ErrConflict, best a *ConflictError
// carrying the key's real current value and version (NoVersion if it is
// absent), which saves the Breaker a Get. A store whose Traits say Atomic
// == false cannot compare and writes unconditionally; it declares so
// rather than pretending.
//
// # Expiry
//
// Every write carries a TTL, and the entry it makes lives for that TTL:
//
//   - Every write replaces the TTL: an update lives for the TTL it was
//     written with, longer or shorter than the write before (never Redis
//     KEEPTTL, etcd WithIgnoreLease, or an update that leaves the old
//     expiry attribute: a record would vanish while its restraint runs).
//   - Round a TTL up to your backend's unit, never down and never to a
//     cap: 2.5 s on a store of whole seconds is 3 s, 1.5 ms on a store of
//     milliseconds is 2 ms. Declare the unit as ExpiryModel.Granularity.
//     A backend maximum below what a Breaker writes (its StateTTL, 30 min
//     5 s by default, hours with long settings) is a bug, not a trait.
//   - An entry whose TTL has passed is absent for Get (ErrNotFound),
//     CompareAndSwap (a create succeeds, a swap with its version
//     conflicts), CompareAndDelete (ErrNotFound) and List, even when the
//     backend has not deleted it yet.
//
// How early or late an entry may vanish, and whose clock decides, is what
// the store declares in Traits.Expiry (ExpiryModel, ExpiryKind); the
// Breaker's margin follows from it (ExpiryModel.RequiredMargin).
//
// # Deletes and tombstones
//
// A store may keep something at a deleted key: a tombstone, so that a
// re-create continues from the deleted record's version (Redis), or so
// that a resent delete recognises its own work (below). A tombstone reads
// as absent everywhere: Get returns ErrNotFound, a create over it
// succeeds, a CompareAndDelete finds nothing (ErrNotFound) unless it is
// the resend of the delete that left it, List does not list it, and
// ExpiryReader.Expiry reports ErrNotFound. It must live at least as long as
// the delete that made it can still be resent: the caller's context
// (Settings.CallTimeout) and the client's retry back-off. Ours keep it
// longer: Redis the deleted record's remaining TTL (a minute for a key that
// had none), PostgreSQL and DynamoDB until their purge, at least a minute
// and an hour after the delete by default. After that it may vanish, as
// long as versions still never repeat.
//
// # Lost answers: recognising your own write
//
// A write can be applied by the backend and its answer lost (a connection
// reset after the server committed). A client that retries inside the call
// (go-redis up to MaxRetries, the AWS SDK's retryer, an adapter's own
// resend) then meets its own first attempt: the swap finds a version other
// than old, the create finds the key present, the delete finds it gone. A
// Breaker that is told "conflict" counts its failure twice, and a probe
// winner is told to hold. So:
//
//   - A write the backend applied reports success (the version it got),
//     however many attempts it took; never a conflict with its own write,
//     never ErrNotFound for its own delete.
//   - If the adapter cannot tell, it returns an error that matches neither
//     ErrConflict nor ErrNotFound: the outcome is unknown, and the
//     Breaker's next call reads what is stored.
//
// A backend that names each write (DynamoDB's random versions, compared in
// the condition) recognises it by the version. A store without write ids
// (Redis, PostgreSQL, most SQL and key-value stores) gets one: every call
// draws a random id of at least 64 bits and stores it in the entry with
// the value, in the same atomic step that compares. The step then checks
// first whether the entry already carries this call's id: if so, the write
// was applied by an earlier attempt, and the step returns success with the
// version that attempt got instead of comparing again. Redis keeps the id
// in the record's hash (field w) and the Lua script checks it; PostgreSQL
// keeps the ids of the last five writes, with their versions, so that a
// resend is recognised even after others wrote in between, and its
// create condition refuses a row that holds the call's id, so a create is
// never applied twice. A delete leaves a tombstone carrying its id, which
// is how its resend knows the key is gone by its own doing.
//
// An adapter may also turn its client's retries off (etcd's client does
// not retry a sent Txn): a lost answer is then an error with the outcome
// unknown, which is allowed. If it depends on retries being off, New
// checks the client it is given and refuses one that retries, as it would
// any other option it cannot work with. What it may not do is leave
// retries on and report what the retry saw.
//
// # Context
//
// A call whose context has already ended sends nothing and returns an
// error matching ctx.Err(). A context that ends during a call leaves the
// outcome unknown (the request may have been applied): return an error
// matching ctx.Err() (in a *OpError), never ErrNotFound or ErrConflict,
// never claim the write did not happen; stop resending, and leave no
// goroutine behind that outlives the call.
//
// # Keys
//
// Map each key to your backend's names reversibly: keys that differ in
// any byte (a/b and a%2Fb, Host and host, "a b" and "a+b", "..") stay
// distinct, a 256-byte key of multi-byte runes fits, and List returns each
// key exactly as it was written. Escape what your backend cannot hold
// (URL path segments, reserved characters), and nothing else. Through
// kvbreaker.Prefixed a store sees longer keys: a prefix of up to 128 bytes
// ending in '/', then the key with '/' and '%' escaped to three bytes each.
//
// # Errors
//
// ErrNotFound and conflicts come bare (ErrNotFound itself, a
// *ConflictError or an error matching ErrConflict); every other error is a
// *OpError, "<backend>: <op> <key>: <cause>", with Op one of "get",
// "compare-and-swap", "compare-and-delete", "list", "expiry", "flush",
// "sample clock" (or "dial" and the like for the adapter's own calls). It
// wraps the cause for errors.Is and errors.As and never includes
// credentials. A store that cannot be reached at all returns an
// *UnreachableError (matching ErrUnreachable) as the OpError's cause; an
// invalid constructor argument is a *OptionError.
//
// # Optional interfaces
//
// A Store may also implement:
//
//   - Lister: enumerate live keys by prefix, for `kvbreaker list`.
//   - ExpiryReader: how long the backend keeps a key, NoExpiry for one
//     stored without expiry, for `kvbreaker inspect` and `list`.
//   - Flusher: send queued writes (a store that queues them); Breaker.Close
//     calls it.
//   - ClockSampler: read the server's clock, so a Breaker can check
//     Settings.ClockSkew against it.
//   - Follower: push a prefix's changes (a snapshot, each key's changes
//     in commit order, perhaps merged, Synced heartbeats, Lost and a
//     resync), so a Breaker with a mirror decides without reading; the
//     conformance suite's follow-* cases hold it to that.
//   - io.Closer: release what the store holds; Breaker.Close calls it.
//
// A wrapper shows ClockSampler exactly when the store it wraps does (the
// suite's clock-sampler case sees what MakeStore returns); kvbreaker.Prefixed
// does, and its List and Expiry answer errors.ErrUnsupported over a store
// without them.
//
// # Proving it
//
// conformance.Run(t, newHarness) from the adapter's tests, against a real
// server, holds the store to every rule above and to its declared Traits;
// conformance/ADAPTERS.md walks through writing the harness.
package driver
