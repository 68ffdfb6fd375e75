package driver

import (
	"context"
	"strconv"
	"time"
)

// Follower is an optional Store interface: a store that can push its
// changes. A Breaker whose Settings.Mirror is set follows its store's keys
// and, while the feed is healthy, decides from a local mirror of them
// instead of reading the store; its writes still compare-and-swap against
// the store. etcd (Watch from a revision), Redis (CLIENT TRACKING in BCAST
// mode), PostgreSQL (LISTEN/NOTIFY from a trigger), NATS JetStream KV (a
// push consumer of the bucket's stream), SQLite (polling the file, as no
// push crosses processes) and the memory store implement it; DynamoDB (no
// streams this adapter can rely on), Workers KV (eventually consistent for
// up to 60 s) and MySQL (only its binary log pushes changes) do not.
//
// The feed's one promise is that a follower that has seen Synced{At: t}
// knows, for every key changed before t, either its latest state committed
// before t (a Put or a Delete of it, or of a later change) or that its
// state is unknown until read (a Stale delivered after the last state it
// delivered for that key), having seen each key's changes in commit order
// (some perhaps merged). Every way the store cannot keep it (a dropped
// connection, a compacted history, an overflowing buffer, a resent
// subscription) is reported as Lost, never resumed silently past a gap.
//
// etcd, NATS, SQLite and the memory store deliver values (Put, Delete). Redis and
// PostgreSQL learn only which keys changed (an invalidation, a NOTIFY of
// the key) and deliver Stale for them: a follower reads such a key from
// the store when it next needs it, rather than every follower re-reading
// every change.
type Follower interface {
	// Follow delivers to fn, one change at a time and in order, a snapshot
	// of every live key that begins with prefix and then every change
	// after it, until ctx ends. It blocks: it returns ctx's error once
	// ctx ends, or an error when it cannot follow at all (the store
	// refused, or cannot follow this prefix: errors.ErrUnsupported).
	//
	// The feed starts with Reset, then a Put for each live key of the
	// snapshot, then Synced. After that it sends, for each write, a Put of
	// that write or of a later one of the same key, or a Stale of the key;
	// for each deletion (and each expiry the store reports) a Delete, a
	// later change, or a Stale. A key's changes may merge, and one may
	// arrive twice in a row, but an older change never follows a newer
	// one, and a Stale is sent after the change it reports has committed
	// (so a read that follows it sees that change or a later one). A
	// follower that has seen Stale for a key holds nothing of it until it
	// reads it or a later Put or Delete arrives. It sends Synced at least
	// every heartbeat while nothing else arrives, each
	// with an At no later than the instant (by the caller's clock, time.Now)
	// before which every commit has been delivered (as itself, a later
	// change, or a Stale): a follower measures how far behind it may be
	// from that, never assumes it. When the feed
	// may have missed a change, Follow sends Lost (Err says why), then
	// resynchronises with a new Reset, snapshot and Synced, for as long as
	// ctx lasts; between Lost and that Synced the caller decides nothing
	// from what it received.
	//
	// A heartbeat that is not positive, or a nil fn, is refused at once
	// with an error, before Follow contacts the store (adapter.FollowArgs
	// says it the same way for every adapter).
	//
	// fn runs on Follow's goroutine and must return quickly; Follow does
	// not reuse Value after fn returns. Keys are delivered as written
	// (kvbreaker.Prefixed translates its prefix). Follow honours ctx
	// everywhere and leaks no goroutine once it has returned.
	Follow(ctx context.Context, prefix string, heartbeat time.Duration, fn func(Change)) error
}

// ChangeKind says what a Change reports.
type ChangeKind int8

const (
	// ChangeReset starts a snapshot: forget every key under the prefix;
	// the snapshot's keys follow as ChangePut, then ChangeSynced.
	ChangeReset ChangeKind = iota + 1
	// ChangePut: Key now holds Value at Version (created or replaced).
	ChangePut
	// ChangeDelete: Key was deleted, or expired (Version is its last
	// version when the store knows it, else NoVersion).
	ChangeDelete
	// ChangeSynced: every change committed before At has been delivered.
	ChangeSynced
	// ChangeLost: the feed may have missed changes (Err says why); what
	// was received is not to be decided on until the next ChangeSynced
	// after a ChangeReset.
	ChangeLost
	// ChangeStale: Key may have changed since the last state delivered
	// for it (if any); its state is unknown until read from the store. Version is
	// NoVersion. Redis and PostgreSQL send it for each key they are told
	// changed; etcd, NATS, SQLite and the memory store send values instead.
	ChangeStale
)

// String returns "reset", "put", "delete", "synced", "lost" or "stale".
func (k ChangeKind) String() string {
	switch k {
	case ChangeReset:
		return "reset"
	case ChangePut:
		return "put"
	case ChangeDelete:
		return "delete"
	case ChangeSynced:
		return "synced"
	case ChangeLost:
		return "lost"
	case ChangeStale:
		return "stale"
	}
	return "change(" + strconv.Itoa(int(k)) + ")"
}

// Change is one event of a Follower's feed.
type Change struct {
	Kind    ChangeKind
	Key     string
	Value   []byte
	Version Version
	// At is set on ChangeSynced (see Follower.Follow).
	At time.Time
	// Err is set on ChangeLost.
	Err error
}
