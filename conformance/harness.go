package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// Harness makes stores for the suite. Implement it in your adapter's
// _test.go and pass a HarnessMaker to Run.
type Harness interface {
	// MakeStore returns a store over a fresh, empty keyspace: a table of
	// its own, or kvbreaker.Prefixed(store, rand.Text()+"/") over a shared
	// one (the hooks below get that store back, and kvbreaker.Unprefixed
	// gives them the inner store and prefix, so they reach the backend's
	// own key PrefixedKey(prefix, key)). The suite calls it once per case,
	// so no case sees another's leftovers (the traits case calls it once
	// more, to check that a second store declares the same Traits). The
	// suite never calls it concurrently, but uses the stores it returns
	// from several goroutines at once.
	MakeStore(ctx context.Context) (driver.Store, error)
	// Close releases what the harness holds; the suite calls it once, at
	// the end.
	Close()
}

// HarnessMaker is called once per Run.
type HarnessMaker func(ctx context.Context, t *testing.T) (Harness, error)

// TimeAdvancer is an optional Harness capability for backends whose clock
// the test controls (Miniflare): Advance moves the backend's clock forward,
// so expiry can be measured without waiting in real time. It must move every
// clock the store judges expiry by: the emulator's and the adapter's.
type TimeAdvancer interface {
	Advance(ctx context.Context, d time.Duration) error
}

// LifetimeReporter is an optional Harness capability that reads how long the
// backend will keep a key, read with the backend's own client: etcd's
// LeaseTimeToLive of the key's lease, Redis's PTTL, PostgreSQL's expires_at
// minus now(), DynamoDB's purge attribute minus now, Workers KV's expiration
// minus now. With it the suite checks expiry at the TTLs a Breaker really
// writes (30 min 5 s by default) without waiting for them. A harness with
// neither this nor TimeAdvancer cannot verify those promises, and Run fails
// unless it waives them (Waive).
type LifetimeReporter interface {
	// Lifetime returns the remaining lifetime of key as written through s
	// (a store this harness made): the time from now until no reader can
	// find it, whatever its clock. For driver.ExpiryRelative that is the
	// server's own expiry; for driver.ExpiryReaderFiltered it is the
	// physical copy's, which the backend deletes on its own clock (the
	// logical expiry plus its padding). Report it as the backend does,
	// rounded down at worst to the store's declared Granularity. It
	// returns driver.NoExpiry for a key stored without expiry, as
	// driver.ExpiryReader does (never an error: the suite judges it), and
	// an error matching driver.ErrNotFound when the key is not stored.
	Lifetime(ctx context.Context, s driver.Store, key string) (time.Duration, error)
}

// SkewedStoreMaker is an optional Harness capability for stores that filter
// expiry by the reader's clock (driver.ExpiryReaderFiltered): it returns a
// store over the same keyspace as s whose clock runs offset from s's
// (negative: behind). With TimeAdvancer it lets the suite check, for a store
// whose physical copy is padded (Traits().MaxClockSkew > 0), that a reader
// whose clock is MaxClockSkew behind still finds every record it counts as
// live.
type SkewedStoreMaker interface {
	MakeSkewedStore(ctx context.Context, s driver.Store, offset time.Duration) (driver.Store, error)
}

// AnswerDropper is an optional Harness capability for stores reached over a
// network: DropNextAnswer makes the backend apply the next request any store
// of this harness sends and that request's answer be lost (the connection
// reset after the request was forwarded), as a loopback fault proxy between
// the client and the server does: *faultproxy.Proxy (package
// github.com/kvbreaker/kvbreaker/conformance/faultproxy) has this method,
// so a harness's is return h.proxy.DropNextAnswer(ctx). Every client of
// every store the harness makes must dial the proxy, not the server, and
// keep the retries it has in production. The suite then checks that the
// adapter (or its client's retry) recognises its own write: a
// compare-and-swap or compare-and-delete applied and retried reports
// success (or an error saying the outcome is unknown), never a conflict
// with itself or ErrNotFound for its own delete, and a Breaker counts the
// failure whose write it was once. The suite arms it right before the one
// call it means, never while other cases run.
type AnswerDropper interface {
	DropNextAnswer(ctx context.Context) error
}

// Describer is an optional Harness capability that names the store and its
// address ("etcd at 127.0.0.1:2379"), quoted when the store does not answer.
type Describer interface {
	Describe() string
}

// FeedBreaker is an optional Harness capability for stores whose Follow
// (driver.Follower) keeps a connection to a server: BreakFeed cuts, now,
// the connections of every store this harness made, as a network fault
// does. *faultproxy.Proxy (package
// github.com/kvbreaker/kvbreaker/conformance/faultproxy) has this method,
// resetting every connection through it, so a harness's is return
// h.proxy.BreakFeed(ctx); the follower's connection must dial the proxy,
// as every client of the harness's stores does for AnswerDropper. The
// suite then writes and deletes while the follower reconnects, and checks
// that the feed either says Lost and resynchronises (Reset, a snapshot
// holding those writes, Synced) or resumes having missed none of them,
// never past a gap. It breaks the feed only while no other case runs.
type FeedBreaker interface {
	BreakFeed(ctx context.Context) error
}

// Wiper is an optional Harness capability for a store that other programs
// can change behind the adapter's back, the store's own way: a bulk delete
// (Redis FLUSHDB, SQL DELETE FROM or TRUNCATE, etcd's delete of a range, a
// NATS stream purge), or a replacement (Redis SWAPDB, a database file
// restored from a copy). An operator does this to reset every circuit. The
// suite then checks that a follower sees it as deletes, changes or Lost
// before any Synced whose At is after it: a feed that misses it keeps a
// mirror answering from records the store no longer holds.
type Wiper interface {
	// Wipes names the ways Wipe knows ("FLUSHDB", "DELETE FROM"); the
	// suite tries each, on a fresh prefix, in this order.
	Wipes() []string
	// Wipe changes, the named way, every key of s's keyspace (s is a store
	// this harness made) without going through the adapter, and returns
	// once the change has committed. Afterwards each key written through s
	// is either gone or holds what the wipe left there (a copy taken
	// earlier); the suite reads each back through s to know which. It may
	// change other stores' keys too: the suite wipes only while no other
	// case runs.
	Wipe(ctx context.Context, s driver.Store, how string) error
}
