package driver

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors a Store returns; test for them with errors.Is.
var (
	// ErrNotFound: the key is absent or logically expired.
	ErrNotFound = errors.New("kvbreaker: not found")
	// ErrConflict: a compare-and-swap or compare-and-delete found a version
	// other than the expected one.
	ErrConflict = errors.New("kvbreaker: version conflict")
)

// Version identifies one write of a key. It is opaque to Breaker except that
// NoVersion means "absent". Adapters map it to what their backend has (etcd's
// ModRevision, a DynamoDB version attribute, a counter).
type Version uint64

// NoVersion is the version of an absent key: a CompareAndSwap expecting it
// creates the key only if it is absent (or logically expired).
const NoVersion Version = 0

// Store is the contract a key-value adapter implements; the package doc
// states it whole (versions, expiry, tombstones, lost answers, context,
// keys, errors). kvbreaker.Breaker is its only caller; every method honours
// ctx and is safe for concurrent use.
//
// A store whose Traits say Atomic == false cannot compare: CompareAndSwap and
// CompareAndDelete then write unconditionally (last writer wins) and Breaker
// says so once through log/slog.
type Store interface {
	// Get returns the value and version of key, or ErrNotFound when key is
	// absent, expired or a tombstone.
	Get(ctx context.Context, key string) ([]byte, Version, error)
	// CompareAndSwap writes value if the current version of key is old
	// (NoVersion: only if absent or expired) and returns the new version,
	// never used for key before; otherwise an error matching ErrConflict,
	// best a *ConflictError with the current value and version. The entry
	// lives for ttl, rounded up to the store's Granularity, whatever TTL
	// the key had before. A write applied by an earlier attempt of this
	// call is a success, never a conflict with itself.
	CompareAndSwap(ctx context.Context, key string, old Version, value []byte, ttl time.Duration) (Version, error)
	// CompareAndDelete deletes key if its current version is old. It returns
	// ErrNotFound when the key is already absent (unless an earlier attempt
	// of this call deleted it: then nil) and an error matching ErrConflict
	// when another version is there.
	CompareAndDelete(ctx context.Context, key string, old Version) error
	// Traits declares what the store promises; the conformance suite holds
	// it to exactly this.
	Traits() Traits
}

// ConflictError is a conflict that carries the key's current value, for
// backends that return it in the same round trip (etcd's Txn Else branch,
// DynamoDB's ReturnValuesOnConditionCheckFailure). It matches ErrConflict.
type ConflictError struct {
	// Value and Version are the key's current contents; Version is
	// NoVersion when the key is now absent.
	Value   []byte
	Version Version
	// Err is the backend's own error, if any, kept for errors.As.
	Err error
}

func (e *ConflictError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%v (current version %d): %v", ErrConflict, e.Version, e.Err)
	}
	return fmt.Sprintf("%v (current version %d)", ErrConflict, e.Version)
}

// Unwrap lets errors.Is match ErrConflict and errors.As find the backend error.
func (e *ConflictError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrConflict}
	}
	return []error{ErrConflict, e.Err}
}

// ExpiryKind says whose clock decides that an entry has expired. The rule:
// if the server's clock takes part in deciding (it counts the TTL down, or
// computes or compares the expiry instant), the kind is ExpiryRelative;
// only when both the instant and the comparison come from the Breakers'
// own clocks, the writer's and the reader's, is it ExpiryReaderFiltered.
// Hiding expired entries from reads and deleting them later does not make
// a store reader-filtered: whose clock hides them does.
type ExpiryKind int8

const (
	// ExpiryRelative: the store's server judges expiry by its own clock.
	// It counts the TTL down (etcd leases, the memory store, Workers KV
	// expiration_ttl), or stores its own now plus the TTL and compares that
	// with its own now on every read and condition (Redis PEXPIRE,
	// PostgreSQL expires_at = now() + ttl): the same thing on the server's
	// clock. The writer's and the prober's clocks both differ from the
	// server's, so the margin covers twice the fleet's clock skew.
	ExpiryRelative ExpiryKind = iota
	// ExpiryReaderFiltered: the writer stores an absolute expiry instant
	// from its own clock and every reader compares it with its own clock
	// (DynamoDB's expiresAt attribute, Workers KV metadata); the server's
	// clock takes no part, and writer/reader skew cancels out. The physical
	// copy, deleted by the backend on its own clock, must outlast the
	// logical expiry (Traits.MaxClockSkew).
	ExpiryReaderFiltered
)

func (k ExpiryKind) String() string {
	switch k {
	case ExpiryRelative:
		return "relative"
	case ExpiryReaderFiltered:
		return "reader-filtered"
	}
	return fmt.Sprintf("unknown expiry kind: %d", int(k))
}

// ExpiryModel describes how a store's entries expire relative to the TTL
// they were written with.
type ExpiryModel struct {
	Kind ExpiryKind
	// Granularity is the unit the store rounds TTLs (or expiry instants)
	// up to, never down (etcd: 1 s, so 2.5 s becomes 3 s; Redis: 1 ms;
	// zero for exact). Since an instant of that resolution can be judged
	// against a clock at any phase of the unit, the suite and the margin
	// allow an entry to vanish up to one Granularity before its TTL, and
	// one after; declaring it permits no rounding down.
	Granularity time.Duration
	// MinTTL is the shortest TTL the backend grants; shorter requests are
	// raised to it (Workers KV: 60 s). There is no maximum: a store caps no
	// TTL.
	MinTTL time.Duration
	// Early is how long before its TTL (rounded) an entry may vanish; zero
	// for a store that never expires early.
	Early time.Duration
	// Late is how long after its TTL an entry may still be read: for
	// ExpiryRelative, how late the server's expiry may act (etcd checks
	// leases every 500 ms; Redis keeps a key through the millisecond its
	// TTL ends in). For ExpiryReaderFiltered reads drop the entry on time,
	// and Late is only how long the physical copy may remain beyond the
	// logical expiry and its padding.
	Late time.Duration
}

// RequiredMargin is the smallest TTLMargin that keeps a record alive until it
// can no longer matter, for a fleet whose clocks differ from true time by at
// most skew (DESIGN §2): Early + Granularity, plus 2×skew for relative
// expiry. Granularity counts as at least a millisecond, the resolution
// records keep time at: an entry is gone at the very instant its TTL ends,
// which is also the instant the probe falls due when the clocks are skew
// apart, so an exact store needs that one tick (the skew package's margin
// experiment shows the demotion without it).
func (m ExpiryModel) RequiredMargin(skew time.Duration) time.Duration {
	need := m.Early + max(m.Granularity, time.Millisecond)
	if m.Kind == ExpiryRelative {
		need += 2 * skew
	}
	return need
}

// Traits is what a Store declares about itself.
type Traits struct {
	// Atomic: CompareAndSwap and CompareAndDelete really compare. False
	// means last writer wins.
	Atomic bool
	// Expiry is the store's expiry model.
	Expiry ExpiryModel
	// ReadStaleness bounds how old a Get's answer may be; zero for
	// linearizable reads.
	ReadStaleness time.Duration
	// MinWriteInterval is the shortest interval between writes to one key
	// the backend accepts (Workers KV: 1 s); zero for none.
	MinWriteInterval time.Duration
	// MaxClockSkew is the largest Settings.ClockSkew the store's physical
	// expiry covers. A reader-filtered store keeps its physical copy past
	// the logical expiry by a padding (DynamoDB's purge delay, Workers KV's
	// padded expiration_ttl) so that a reader whose clock is behind still
	// finds the record it counts as live; the padding bounds the skew it
	// covers. Zero means no bound: the physical expiry is the logical one.
	MaxClockSkew time.Duration
	// InProcess: the store answers without I/O (backends/memory), so the
	// Breaker skips its per-call timeout, which would cost more than the
	// call itself.
	InProcess bool
	// MaxClockSkewOption names the adapter option that raises MaxClockSkew
	// (e.g. "dynamodb.WithPurgeDelay"), quoted when NewConfig refuses a
	// larger ClockSkew.
	MaxClockSkewOption string
}

// MaxKeyLen is the longest key, in bytes, Breaker passes to a Store.
const MaxKeyLen = 256

// ErrInvalidKey is returned for a host key Breaker will not pass to a store.
var ErrInvalidKey = errors.New("kvbreaker: invalid host key")

// ValidateKey reports whether key can be passed to a Store: non-empty, valid
// UTF-8, at most MaxKeyLen bytes, and free of control characters.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	if printableASCII(key) {
		return nil // nearly every host name: no rune decoding on the hot path
	}
	for i, r := range key {
		if r == 0xFFFD && !validRuneAt(key, i) {
			return fmt.Errorf("%w: invalid UTF-8 at byte %d", ErrInvalidKey, i)
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("%w: control character %U at byte %d", ErrInvalidKey, r, i)
		}
	}
	return nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}

// validRuneAt reports whether the U+FFFD decoded at i is really encoded there
// (three bytes EF BF BD) rather than the marker of an invalid byte.
func validRuneAt(s string, i int) bool {
	return len(s) >= i+3 && s[i] == 0xEF && s[i+1] == 0xBF && s[i+2] == 0xBD
}

// Lister is an optional Store interface: enumerating the keys a store holds,
// for operators (`kvbreaker list`). A store that cannot enumerate cheaply
// does not implement it.
type Lister interface {
	// List returns up to limit live keys that begin with prefix, starting
	// after cursor ("" for the first page), and the cursor of the next page
	// ("" after the last one). A cursor is opaque to callers: they pass it
	// back as it came, with the same prefix.
	//
	// Across the pages of one listing every key that is live under prefix
	// throughout it is listed, even when keys are written between pages (a
	// key written or deleted meanwhile may or may not be listed); none
	// outside prefix, none expired or deleted (tombstones are not keys),
	// and each exactly as it was written. A key may be listed more than
	// once (Redis's SCAN repeats keys when its table is rehashed during a
	// scan), so a caller that counts keys removes repeats. The order is the
	// store's and callers assume none (SCAN has none). A page holds at most limit keys, and may hold fewer,
	// even none, before the end (a store that filters expired entries after
	// fetching a page). A limit below 1 is an error (a *OpError), not a
	// request for everything.
	List(ctx context.Context, prefix, cursor string, limit int) (keys []string, next string, err error)
}

// ExpiryReader is an optional Store interface for operators (`kvbreaker
// inspect` and `list`): how long the backend will keep a key. Every write a
// Breaker makes carries a TTL, so a key without one was written by
// something else, and an operator must be able to see that.
type ExpiryReader interface {
	// Expiry returns the time from now until the backend deletes key (or
	// stops returning it), NoExpiry when key is stored without an expiry,
	// or an error matching ErrNotFound when key is absent.
	Expiry(ctx context.Context, key string) (time.Duration, error)
}

// NoExpiry is what ExpiryReader.Expiry returns for a key stored without an
// expiry: the longest Duration, so that it compares as "later than any".
const NoExpiry = time.Duration(1<<63 - 1)

// Flusher is an optional Store interface for stores that queue writes
// (backends/cloudflarekv): Flush returns once every queued write has been
// sent, or ctx ends. kvbreaker.Breaker.Close calls it.
type Flusher interface {
	Flush(ctx context.Context) error
}

// ClockSampler is an optional Store interface for stores that can read their
// server's clock, so a Breaker can detect a worker clock further from the
// store's than Settings.ClockSkew assumes. A store without a clock it can
// read (etcd: its API shows none) does not implement it.
type ClockSampler interface {
	// SampleClock reads the server's clock in one round trip. The server's
	// true reading lies in [t, t+resolution): an HTTP Date header truncates
	// to the second (resolution 1 s), Redis TIME to the microsecond. The
	// caller times the round trip itself.
	SampleClock(ctx context.Context) (t time.Time, resolution time.Duration, err error)
}

// OpError is the shape of every error a Store method returns other than
// ErrNotFound and conflicts (which come bare, ErrNotFound as itself and a
// conflict as a *ConflictError or an error matching ErrConflict): it reads
// "<backend>: <op> <key>: <cause>", names no credentials, and unwraps to
// the cause.
type OpError struct {
	Backend string // "etcd", "dynamodb", …
	Op      string // "get", "compare-and-swap", "compare-and-delete", "list", …
	Key     string // the key as the caller passed it; empty for calls without one
	Err     error
}

func (e *OpError) Error() string {
	if e.Key == "" {
		return e.Backend + ": " + e.Op + ": " + e.Err.Error()
	}
	return e.Backend + ": " + e.Op + " " + e.Key + ": " + e.Err.Error()
}

func (e *OpError) Unwrap() error { return e.Err }

// OptionError is an invalid adapter option or constructor argument, as
// every adapter's constructor reports it: "<backend>: invalid <option>:
// <value>: <what to change>".
type OptionError struct {
	Backend string // "etcd", "dynamodb", …
	Option  string // the option or argument, e.g. "WithCallTimeout" or "table name"
	Value   any
	Fix     string // what to change, e.g. "set a positive duration"
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("%s: invalid %s: %v: %s", e.Backend, e.Option, e.Value, e.Fix)
}
