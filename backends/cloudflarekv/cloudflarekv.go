// Package cloudflarekv is a driver.Store over Cloudflare Workers KV, through
// the REST API with cloudflare-go v6 (only its kv, option and shared
// packages). Users bring their own client and token (kvbreaker never loads
// credentials):
//
//	cf := cloudflare.NewClient(option.WithAPIToken(os.Getenv("CLOUDFLARE_API_TOKEN")))
//	store, err := cloudflarekv.New(cf.KV, accountID, namespaceID)
//
// # What Workers KV can and cannot promise
//
// Workers KV has no compare-and-swap, so the store declares
// Traits().Atomic == false and kvbreaker.Breaker runs last-writer-wins:
// CompareAndSwap and CompareAndDelete write whatever version they are given.
// Concurrent workers may each see a transition (two probes, two
// OnStateChange calls), and a write from one process can overwrite another
// process's write of the same host within KV's propagation delay.
//
// # Expiry
//
// Each record is written with expiration_ttl = max(60 s, ⌈ttl + 2·skew + 1 s⌉)
// (the physical TTL, counted by Cloudflare), and the exact logical expiry,
// the writer's clock plus ttl to the millisecond, is stored both in the
// value's envelope and in the key's metadata. Get filters by the reader's
// own clock, so writer/reader skew cancels (DESIGN §2: reader-filtered
// absolute expiry). The physical TTL is padded by twice the clock-skew bound
// and one second of granularity so that Cloudflare never deletes a record a
// reader still counts as live; set WithClockSkew to at least the fleet's
// Settings.ClockSkew (Traits().MaxClockSkew declares it, and
// kvbreaker.New refuses a larger Settings.ClockSkew). The 60 s floor is
// the physical copy's only: what Get returns, and so what a Breaker sees,
// expires at the exact TTL (Traits declares no MinTTL).
//
// # Rate limits
//
// Workers KV allows one write per second per key and an account-wide API
// budget (1,200 requests per 5 minutes), so the store:
//
//   - serves reads from a bounded local cache (LRU, WithCache), which adds at
//     most its freshness (default 10 s) to KV's own staleness of up to 60 s;
//     the store's own writes update it at once, and absent keys are cached
//     too, so healthy hosts cost one read per freshness period;
//   - coalesces writes to one key: at most one request per WithWriteInterval
//     (default 1 s) per key; writes arriving meanwhile are merged into one
//     queued write (see CompareAndSwap for the merge and what can be lost);
//   - honours 429 and Retry-After: the store backs off as a whole, queued
//     writes are retried after it, reads are served from the cache (up to
//     the declared ReadStaleness) or fail at once with ErrRateLimited, and no
//     caller waits past its context;
//   - sets cloudflare-go's retries to 1 (its default of 10, with backoff up
//     to 30 s, blocks for minutes on a dead endpoint), and never lets it
//     retry a 429 itself. One retry means: after a transport error (no
//     answer, a reset connection) or an HTTP 408, 409 or 5xx, the SDK sends
//     the same request once more, 1.5 to 2 s later (2 s minus up to 25%
//     jitter; TestSDKRetryOfLostAnswer measures it through a fault proxy).
//
// # Ambiguous outcomes
//
// A write whose answer is lost (or is a 5xx) may have been applied. Every
// write carries its own version in its envelope, so sending it again
// stores the same bytes, and a repeated delete of a key already gone is
// answered 200: the SDK's retry and the store's own resend (a write still
// without a definite answer after the SDK's retries is queued again, like a
// 429, up to 5 attempts) count no failure twice and make the caller learn
// that its write took effect. What a resend cannot undo is last-writer-wins
// itself: another process's write that lands between the two attempts is
// overwritten by the second, as by any later write.
package cloudflarekv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cloudflare/cloudflare-go/v6/kv"
	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
	"golang.org/x/sync/singleflight"
)

// Limits and defaults.
const (
	// MaxKeyLen is Workers KV's limit on a key name, in bytes; the prefix
	// plus the host must fit.
	MaxKeyLen = 512
	// MinTTL is Workers KV's shortest expiration_ttl: the floor of the
	// physical copy only. Logical expiry, which Get filters by, is the
	// exact TTL whatever its length, so Traits declares no minimum.
	MinTTL = 60 * time.Second
	// Propagation is how long Workers KV may serve an old value after a
	// write (eventual consistency).
	Propagation = 60 * time.Second

	// DefaultPrefix is prepended to every host to make its key name.
	DefaultPrefix = "kvbreaker:"
	// DefaultWriteInterval is Workers KV's one write per second per key.
	DefaultWriteInterval = time.Second
	// DefaultCacheSize is how many keys the read cache holds.
	DefaultCacheSize = 4096
	// DefaultCacheFreshness is how long a read answer is reused; it adds
	// to KV's own staleness.
	DefaultCacheFreshness = 10 * time.Second
	// DefaultMaxRetries is cloudflare-go's retries per request.
	DefaultMaxRetries = 1
	// DefaultRequestTimeout bounds each request.
	DefaultRequestTimeout = 10 * time.Second
	// DefaultMaxAttempts bounds how often one queued write is sent while
	// the API answers 429.
	DefaultMaxAttempts = 5

	// granularity is Workers KV's expiry unit.
	granularity = time.Second
	// maxRetryAfter caps how long one 429 stops the store.
	maxRetryAfter = 5 * time.Minute
)

// ErrRateLimited is matched (errors.Is) by the error a call returns when
// Cloudflare answered 429 or the store is backing off after one; a
// *RateLimitError says until when.
var ErrRateLimited = errors.New("cloudflarekv: rate limited")

// RateLimitError is a 429 from Cloudflare, or the backoff that follows one.
type RateLimitError struct {
	// Until is when the store will send again.
	Until time.Time
	// Queued is set for a write that stays queued and will be sent after
	// Until even though its caller was answered with this error.
	Queued bool
}

func (e *RateLimitError) Error() string {
	s := fmt.Sprintf("rate limited (429) until %s", e.Until.Format(time.RFC3339Nano))
	if e.Queued {
		s += "; the write stays queued and is sent then"
	}
	return s
}

// Is matches ErrRateLimited.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }

// Store is a driver.Store over one Workers KV namespace. It is safe for
// concurrent use. The zero value is not usable; call New.
type Store struct {
	values     *kv.NamespaceValueService
	account    string
	namespace  string
	prefix     string
	clock      func() time.Time
	skew       time.Duration
	pad        time.Duration // added to ttl for the physical TTL
	interval   time.Duration
	freshness  time.Duration
	maxRetries int
	timeout    time.Duration
	attempts   int
	log        *slog.Logger

	cache  *cache
	reads  singleflight.Group
	budget *budget // nil: no request budget

	mu      sync.Mutex
	keys    map[string]*keyState
	seq     uint64    // write sequence, for keyState.seq
	backoff time.Time // real time until which nothing is sent (429)
	sweepAt int       // len(keys) that triggers the next sweep
	idle    *sync.Cond
}

// Option configures a Store.
type Option func(*Store)

// WithPrefix sets the key prefix (default "kvbreaker:"), so several breakers
// or applications can share a namespace. It must contain a character other
// than '.', and be at most 256 bytes.
func WithPrefix(p string) Option { return func(s *Store) { s.prefix = p } }

// WithClock sets the clock logical expiry is written and judged by (default
// time.Now). Give it the same clock as the Breakers' Settings.Clock.
func WithClock(clock func() time.Time) Option { return func(s *Store) { s.clock = clock } }

// WithClockSkew sets the clock-skew bound the physical TTL is padded for
// (default kvbreaker.DefaultClockSkew, must be positive): twice it plus a second.
// Traits().MaxClockSkew declares it, so kvbreaker.New refuses a
// Settings.ClockSkew larger than it, naming this option: set at least the
// Breakers' Settings.ClockSkew.
func WithClockSkew(d time.Duration) Option { return func(s *Store) { s.skew = d } }

// WithCache sets the read cache's capacity in keys (default 4096; 0 turns
// caching of reads off, though the store's own queued writes are still
// served from memory) and freshness, how long a read answer is reused
// (default 10 s). The store's ReadStaleness is Propagation plus freshness.
func WithCache(size int, freshness time.Duration) Option {
	return func(s *Store) { s.cache = newCache(size); s.freshness = freshness }
}

// WithWriteInterval sets the shortest interval between two writes of one
// key (default 1 s, Workers KV's limit). Writes arriving within it are
// coalesced.
func WithWriteInterval(d time.Duration) Option { return func(s *Store) { s.interval = d } }

// WithMaxRetries sets cloudflare-go's retries per request (default 1) for
// transport errors and 5xx answers; 429s are never retried by the SDK.
func WithMaxRetries(n int) Option { return func(s *Store) { s.maxRetries = n } }

// WithRequestTimeout bounds each request (default 10 s). Requests run
// detached from any one caller, since several callers may share one read or
// be merged into one write; each caller still stops waiting when its own
// context ends.
func WithRequestTimeout(d time.Duration) Option { return func(s *Store) { s.timeout = d } }

// WithLogger sets where the store reports writes it had to give up with no
// caller left to tell (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

// New returns a store over the Workers KV namespace namespaceID of account
// accountID, using client (a *kv.KVService: cloudflare.Client's KV field, or
// kv.NewKVService(option.WithAPIToken(token))). It reports every invalid
// option in one error.
func New(client *kv.KVService, accountID, namespaceID string, opts ...Option) (*Store, error) {
	s := &Store{
		account:    accountID,
		namespace:  namespaceID,
		prefix:     DefaultPrefix,
		clock:      time.Now,
		skew:       kvbreaker.DefaultClockSkew,
		interval:   DefaultWriteInterval,
		cache:      newCache(DefaultCacheSize),
		freshness:  DefaultCacheFreshness,
		maxRetries: DefaultMaxRetries,
		timeout:    DefaultRequestTimeout,
		attempts:   DefaultMaxAttempts,
		log:        slog.Default(),
		keys:       make(map[string]*keyState),
		sweepAt:    1024,
	}
	s.idle = sync.NewCond(&s.mu)
	for _, o := range opts {
		o(s)
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if client == nil || client.Namespaces == nil || client.Namespaces.Values == nil {
		bad("client is nil: pass cloudflare.Client's KV field, or kv.NewKVService(option.WithAPIToken(token))")
	} else {
		s.values = client.Namespaces.Values
	}
	if accountID == "" || strings.ContainsAny(accountID, "/?#%") {
		bad("account ID %q is empty or not an ID", accountID)
	}
	if namespaceID == "" || strings.ContainsAny(namespaceID, "/?#%") {
		bad("namespace ID %q is empty or not an ID", namespaceID)
	}
	switch {
	case strings.Trim(s.prefix, ".") == "":
		bad("WithPrefix: prefix %q must contain a character other than '.' (KV rejects the key names \".\" and \"..\")", s.prefix)
	case len(s.prefix)+driver.MaxKeyLen > MaxKeyLen:
		bad("WithPrefix: prefix is %d bytes: at most %d, so that it and a %d-byte host fit KV's %d-byte key limit", len(s.prefix), MaxKeyLen-driver.MaxKeyLen, driver.MaxKeyLen, MaxKeyLen)
	case !utf8.ValidString(s.prefix):
		bad("WithPrefix: prefix %q is not valid UTF-8", s.prefix)
	}
	if s.clock == nil {
		bad("WithClock: clock is nil: pass the Breakers' Settings.Clock, or leave it out for time.Now")
	}
	if s.skew <= 0 {
		bad("WithClockSkew(%v): the clock skew bound must be positive: set it to the Breakers' Settings.ClockSkew (default %v)", s.skew, kvbreaker.DefaultClockSkew)
	}
	if s.interval <= 0 {
		bad("WithWriteInterval(%v): the write interval must be positive: Workers KV accepts one write per second per key, so set %v", s.interval, DefaultWriteInterval)
	}
	if s.cache.max < 0 {
		bad("WithCache: cache size %d is negative: set a number of keys, or 0 to cache no reads", s.cache.max)
	}
	if s.freshness < 0 {
		bad("WithCache: freshness %v is negative: set how long a read answer may be reused (default %v), or 0", s.freshness, DefaultCacheFreshness)
	}
	if s.maxRetries < 0 {
		bad("WithMaxRetries(%d): retries must be 0 or more (default %d)", s.maxRetries, DefaultMaxRetries)
	}
	if s.timeout <= 0 {
		bad("WithRequestTimeout(%v): the request timeout must be positive (default %v)", s.timeout, DefaultRequestTimeout)
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.budget != nil {
		if err := s.budget.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("cloudflarekv: invalid options:\n%w", errors.Join(errs...))
	}
	s.pad = 2*s.skew + granularity
	return s, nil
}

// Traits declares what a Breaker sees: last writer wins; reader-filtered
// absolute expiry, exact to the millisecond and with no minimum TTL (Get
// filters by the logical expiry, so an entry written with a 5 s TTL reads as
// absent 5 s later, although KV keeps the physical copy for at least its
// 60 s minimum); Late bounds that physical copy's extra life, for any TTL:
// the 60 s floor plus the padding plus KV's whole-second rounding. The
// padding covers a Settings.ClockSkew up to WithClockSkew's (MaxClockSkew),
// reads are up to Propagation plus the cache's freshness stale, and one
// write per key per write interval.
func (s *Store) Traits() driver.Traits {
	return driver.Traits{
		Atomic: false,
		Expiry: driver.ExpiryModel{
			Kind:        driver.ExpiryReaderFiltered,
			Granularity: time.Millisecond,
			Late:        MinTTL + s.pad + granularity,
		},
		ReadStaleness:      Propagation + s.freshness,
		MinWriteInterval:   s.interval,
		MaxClockSkew:       s.skew,
		MaxClockSkewOption: "cloudflarekv.WithClockSkew",
	}
}

// Get implements driver.Store. It answers from the cache when it can (a read
// less than the freshness old, or this store's own queued or just-sent
// write), and otherwise with one GET, shared by concurrent callers for the
// same key. An entry whose logical expiry has passed by the store's clock is
// ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, opError("get", key, err)
	}
	full, err := s.fullKey(key)
	if err != nil {
		return nil, 0, opError("get", key, err)
	}
	if e, ok := s.cache.get(full, time.Now(), s.freshness); ok {
		return s.answer(e)
	}
	if until, limited := s.backingOff(); limited {
		// KV is up to Propagation stale anyway: an older cached answer is
		// still within the declared ReadStaleness.
		if e, ok := s.cache.get(full, time.Now(), Propagation+s.freshness); ok {
			return s.answer(e)
		}
		return nil, 0, opError("get", key, &RateLimitError{Until: until})
	}
	ch := s.reads.DoChan(full, func() (any, error) {
		if ok, next := s.spend(); !ok {
			return nil, &BudgetError{Next: next}
		}
		return s.fetch(full)
	})
	select {
	case r := <-ch:
		if errors.Is(r.Err, ErrBudgetExhausted) {
			// As under a 429: an older cached answer is still within
			// the declared ReadStaleness.
			if e, ok := s.cache.get(full, time.Now(), Propagation+s.freshness); ok {
				return s.answer(e)
			}
		}
		if r.Err != nil {
			return nil, 0, opError("get", key, r.Err)
		}
		return s.answer(r.Val.(entry))
	case <-ctx.Done():
		return nil, 0, opError("get", key, ctx.Err())
	}
}

// answer turns a cache entry into Get's result, filtering by logical expiry.
func (s *Store) answer(e entry) ([]byte, driver.Version, error) {
	if !e.present || !s.clock().Before(e.exp) {
		return nil, driver.NoVersion, driver.ErrNotFound
	}
	return clone(e.value), e.ver, nil
}

// CompareAndSwap implements driver.Store, last writer wins: it writes value
// whatever version old is, and returns the version Get will show for it.
//
// Writes are coalesced per key: the first goes out at once, and writes
// arriving within the write interval of the last request are merged into one
// queued write, sent when the interval has passed; every caller waits for
// that request (bounded by its context) and gets its outcome and the version
// stored. A caller whose context ends first gets the context's error, and its
// write is still sent.
//
// Merging, against the queued write or, when none is queued, the write in
// flight or last sent by this store: a write computed from it (old is its
// version; this store's Get returns its own queued and sent writes, so
// sequential callers always are) replaces it, and so does any write when
// its logical expiry has passed by the store's clock (an expired record
// never comes back through a merge); a write computed from an older read
// (another goroutine's, concurrent) is merged with it as records: the union
// of failure instants (uncapped; the next Failure prunes to the history
// limit), the later RestrainedUntil, Probing if either, the longer TTL. A
// delete replaces whatever is queued, and a write after a delete replaces
// the delete, except that a write computed from the version the delete
// removed (a Failure that read the record before a Success deleted it)
// keeps only the failure instants it added: the deleted failures, restraint
// and probe do not come back. Values that are not records: the newer wins.
//
// So coalescing loses nothing this process writes. What can be lost: (1)
// another process's write of the same host within KV's propagation delay
// (last writer wins; Workers KV cannot compare); (2) a write refused with a
// 4xx other than 429, or still without a definite answer (429, 5xx, no
// answer) after the store's attempts (5): its waiting callers get the
// error; if none is left, it is logged; (3) a write still queued when the
// process exits: call Flush. A merged
// Probing flag can label a reopened circuit half-open until its
// RestrainedUntil; the decisions (hold) are the same.
func (s *Store) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	if err := ctx.Err(); err != nil {
		return 0, opError("put", key, err)
	}
	full, err := s.fullKey(key)
	if err != nil {
		return 0, opError("put", key, err)
	}
	if ttl <= 0 {
		return 0, opError("put", key, fmt.Errorf("ttl %v is not positive", ttl))
	}
	w := write{value: clone(value), ttl: ttl, exp: s.clock().Add(ttl).Truncate(time.Millisecond), ver: newVersion(), base: old}
	return s.enqueue(ctx, "put", key, full, w)
}

// CompareAndDelete implements driver.Store, last writer wins: it deletes key
// whatever version old is. It returns ErrNotFound, without writing, when the
// key is absent (from the cache, or one GET when the cache does not know).
// Deletes are coalesced with writes to the same key as CompareAndSwap says.
func (s *Store) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	if err := ctx.Err(); err != nil {
		return opError("delete", key, err)
	}
	full, err := s.fullKey(key)
	if err != nil {
		return opError("delete", key, err)
	}
	gone, cur, err := s.Get(ctx, key)
	if err != nil {
		if errors.Is(err, driver.ErrNotFound) {
			return driver.ErrNotFound
		}
		return err
	}
	// The delete remembers what it removed, so that a write computed from
	// that record (a Failure that read it before this Success) brings
	// back none of it.
	_, err = s.enqueue(ctx, "delete", key, full, write{del: true, ver: newVersion(), base: old, goneVer: cur, goneVal: gone})
	return err
}

// Flush waits until every queued write has been sent (or has failed), or ctx
// ends. Call it before exiting so no recorded failure is left unsent.
func (s *Store) Flush(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.idle.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.busy() {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("cloudflarekv: flush: %w", err)
		}
		s.idle.Wait()
	}
	return nil
}

// busy reports whether a write is queued or being sent. s.mu is held.
func (s *Store) busy() bool {
	for _, st := range s.keys {
		if st.pending != nil || st.inflight != nil {
			return true
		}
	}
	return false
}

// fullKey returns the KV key name for host key: prefix + key.
func (s *Store) fullKey(key string) (string, error) {
	switch {
	case key == "":
		return "", errors.New("empty key")
	case !utf8.ValidString(key):
		return "", errors.New("key is not valid UTF-8")
	case len(s.prefix)+len(key) > MaxKeyLen:
		return "", fmt.Errorf("key of %d bytes with the %d-byte prefix exceeds Workers KV's %d-byte limit", len(key), len(s.prefix), MaxKeyLen)
	}
	return s.prefix + key, nil
}

// newVersion returns a random version other than driver.NoVersion, below 2^52
// so that it survives JSON in JavaScript (the metadata).
func newVersion() driver.Version {
	for {
		if v := driver.Version(rand.Uint64() >> 12); v != driver.NoVersion {
			return v
		}
	}
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// opError formats "cloudflarekv: <op> <key>: <cause>". Sentinels pass
// through unwrapped so errors.Is works on them either way.
func opError(op, key string, err error) error {
	if errors.Is(err, driver.ErrNotFound) {
		return err
	}
	return fmt.Errorf("cloudflarekv: %s %q: %w", op, key, err)
}
