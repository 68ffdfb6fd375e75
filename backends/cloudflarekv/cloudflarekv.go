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
//
// # Errors and unreachable endpoints
//
// Errors other than driver.ErrNotFound are *driver.OpError
// ("cloudflarekv: get <key>: <cause>"). A refused connection (or an API
// name that does not resolve) sent nothing: it is neither retried by
// cloudflare-go nor resent by the store, and the call fails at once with an
// *driver.UnreachableError, "cannot reach Workers KV at <endpoint>: connection
// refused", matching driver.ErrUnreachable. A caller whose context ends while the
// request is out gets "no answer from Workers KV at <endpoint> before the
// context ended", matching the context's error.
//
// # Lifecycle and listing
//
// Store implements driver.Flusher (kvbreaker.Breaker.Close(ctx) calls
// Flush), driver.Lister (the list-keys API, for `kvbreaker list`; it lists
// what Get returns, see List) and driver.ExpiryReader (Expiry).
//
// A value this package did not write (garbage, empty, another format, an
// envelope it cannot parse, any metadata, with or without an expiration)
// reads as that value with version 1 and no logical expiry, so a Breaker
// takes it for an undecodable record and replaces it on its next write,
// which sets an expiration.
// Close cancels the requests the Store sends on its own (a read shared by
// several callers, a queued write) and waits for them: Breaker.Close calls
// Flush, then Close.
// It reads the API's clock (driver.ClockSampler) from the Date header of one
// GET, to the second, for the Breaker's clock checks: each costs one request
// of the account's budget, once per Breaker every ClockCheckInterval (see
// SampleClock).
package cloudflarekv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/cloudflare/cloudflare-go/v6/kv"
	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
	"golang.org/x/sync/singleflight"
)

// Limits and defaults.
const (
	// MaxKeyLen is Workers KV's limit on a key name, in bytes; a
	// kvbreaker.Prefixed prefix plus the host must fit.
	MaxKeyLen = 512
	// MinTTL is Workers KV's shortest expiration_ttl: the floor of the
	// physical copy only. Logical expiry, which Get filters by, is the
	// exact TTL whatever its length, so Traits declares no minimum.
	MinTTL = 60 * time.Second
	// Propagation is how long Workers KV may serve an old value after a
	// write (eventual consistency).
	Propagation = 60 * time.Second

	// DefaultWriteInterval is Workers KV's one write per second per key.
	DefaultWriteInterval = time.Second
	// DefaultCacheSize is how many keys the read cache holds.
	DefaultCacheSize = 4096
	// DefaultCacheFreshness is how long a read answer is reused; it adds
	// to KV's own staleness.
	DefaultCacheFreshness = 10 * time.Second
	// DefaultMaxRetries is cloudflare-go's retries per request.
	DefaultMaxRetries = 1
	// DefaultCallTimeout bounds each request the store sends on its own
	// (see WithCallTimeout).
	DefaultCallTimeout = 10 * time.Second
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
	values    *kv.NamespaceValueService
	keyList   *kv.NamespaceKeyService
	account   string
	namespace string
	// setting names where the token, account and namespace came from
	// (WithSetting).
	setting [3]string
	// base is the API base URL Dial was given, without credentials, for
	// String; "" for Cloudflare's own or a client passed to New.
	base       string
	clock      func() time.Time
	skew       time.Duration
	pad        time.Duration // added to ttl for the physical TTL
	interval   time.Duration
	freshness  time.Duration
	maxRetries int
	timeout    time.Duration
	attempts   int
	log        *slog.Logger
	endpoint   atomic.Pointer[string] // scheme://host of the API, once a request has gone out

	cache  *cache
	reads  singleflight.Group
	budget *budget // nil: no request budget

	mu      sync.Mutex
	keys    map[string]*keyState
	seq     uint64    // write sequence, for keyState.seq
	backoff time.Time // real time until which nothing is sent (429)
	sweepAt int       // len(keys) that triggers the next sweep
	idle    *sync.Cond
	closed  bool // s.mu

	// life bounds the requests sent for no single caller (a shared read, a
	// queued write); Close ends it and waits for the reads (fetches).
	life    context.Context
	end     context.CancelFunc
	fetches sync.WaitGroup
}

// options is what the Options set; New checks it.
type options struct {
	clock      func() time.Time
	skew       time.Duration
	interval   time.Duration
	cacheSize  int
	freshness  time.Duration
	maxRetries int
	timeout    time.Duration
	log        *slog.Logger
	budget     *budget
	setting    [3]string
}

// Option configures a Store.
type Option func(*options)

// WithClock sets the clock logical expiry is written and judged by (default
// time.Now). Give it the same clock as the Breakers' Settings.Clock.
func WithClock(clock func() time.Time) Option { return func(o *options) { o.clock = clock } }

// WithClockSkew sets the clock-skew bound the physical TTL is padded for
// (default kvbreaker's default ClockSkew, must be positive): twice it plus a second.
// Traits().MaxClockSkew declares it, so kvbreaker.New refuses a
// Settings.ClockSkew larger than it, naming this option: set at least the
// Breakers' Settings.ClockSkew.
func WithClockSkew(d time.Duration) Option { return func(o *options) { o.skew = d } }

// WithCache sets the read cache's capacity in keys (default 4096; 0 turns
// caching of reads off, though the store's own queued writes are still
// served from memory) and freshness, how long a read answer is reused
// (default 10 s). The store's ReadStaleness is Propagation plus freshness.
func WithCache(size int, freshness time.Duration) Option {
	return func(o *options) { o.cacheSize, o.freshness = size, freshness }
}

// WithWriteInterval sets the shortest interval between two writes of one
// key (default 1 s, Workers KV's limit). Writes arriving within it are
// coalesced.
func WithWriteInterval(d time.Duration) Option { return func(o *options) { o.interval = d } }

// WithMaxRetries sets cloudflare-go's retries per request (default 1) for
// transport errors and 5xx answers; 429s are never retried by the SDK, nor
// is a connection that was refused (nothing was sent).
func WithMaxRetries(n int) Option { return func(o *options) { o.maxRetries = n } }

// WithCallTimeout bounds each request the store sends on its own (default
// 10 s): reads and writes run detached from any one caller, since several
// callers may share one read or be merged into one write, and queued writes
// are sent and resent after their callers have gone. Each caller still
// stops waiting when its own context ends (kvbreaker.Settings.CallTimeout
// bounds a Breaker's calls that way).
func WithCallTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithLogger sets where the store reports writes it had to give up with no
// caller left to tell (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithSetting names where the API token, the account ID and the namespace
// ID came from ("$CLOUDFLARE_API_TOKEN", "--cf-account", "--cf-namespace")
// in what Dial says to check when the API refuses its first read.
func WithSetting(token, account, namespace string) Option {
	return func(o *options) { o.setting = [3]string{token, account, namespace} }
}

// New returns a store over the Workers KV namespace namespaceID of account
// accountID, using client (a *kv.KVService: cloudflare.Client's KV field, or
// kv.NewKVService(option.WithAPIToken(token))). Every invalid argument or
// option is reported, joined, as a *driver.OptionError. Keys are the host
// keys as the Breaker passes them: to keep several breakers or applications
// apart in one namespace, wrap the store with kvbreaker.Prefixed.
func New(client *kv.KVService, accountID, namespaceID string, opts ...Option) (*Store, error) {
	o := options{
		clock:      time.Now,
		skew:       kvbreaker.Settings{}.WithDefaults().ClockSkew,
		interval:   DefaultWriteInterval,
		cacheSize:  DefaultCacheSize,
		freshness:  DefaultCacheFreshness,
		maxRetries: DefaultMaxRetries,
		timeout:    DefaultCallTimeout,
		log:        slog.Default(),
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	problems := adapter.Problems{Backend: "cloudflarekv"}
	bad := problems.Add
	if client == nil || client.Namespaces == nil || client.Namespaces.Values == nil || client.Namespaces.Keys == nil {
		bad("client", "nil", "pass cloudflare.Client's KV field, or kv.NewKVService(option.WithAPIToken(token))")
	}
	if accountID == "" || strings.ContainsAny(accountID, "/?#%") {
		bad("account ID", strconv.Quote(accountID), "pass the account's ID (32 hexadecimal digits in the dashboard's URL)")
	}
	if namespaceID == "" || strings.ContainsAny(namespaceID, "/?#%") {
		bad("namespace ID", strconv.Quote(namespaceID), "pass the namespace's ID (wrangler kv namespace list), not its title")
	}
	problems.Clock(o.clock)
	if o.skew <= 0 {
		bad("WithClockSkew", o.skew, fmt.Sprintf("set a positive bound, the Breakers' Settings.ClockSkew (default %v)", kvbreaker.Settings{}.WithDefaults().ClockSkew))
	}
	if o.interval <= 0 {
		bad("WithWriteInterval", o.interval, fmt.Sprintf("set a positive interval: Workers KV accepts one write per second per key, so %v", DefaultWriteInterval))
	}
	if o.cacheSize < 0 {
		bad("WithCache size", o.cacheSize, "set a number of keys, or 0 to cache no reads")
	}
	if o.freshness < 0 {
		bad("WithCache freshness", o.freshness, fmt.Sprintf("set how long a read answer may be reused (default %v), or 0", DefaultCacheFreshness))
	}
	if o.maxRetries < 0 {
		bad("WithMaxRetries", o.maxRetries, fmt.Sprintf("set 0 or more retries (default %d)", DefaultMaxRetries))
	}
	problems.Positive("WithCallTimeout", o.timeout, DefaultCallTimeout)
	if o.budget != nil {
		o.budget.validate(&problems)
	}
	if err := problems.Err(); err != nil {
		return nil, err
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	s := &Store{
		values:     client.Namespaces.Values,
		keyList:    client.Namespaces.Keys,
		account:    accountID,
		namespace:  namespaceID,
		setting:    o.setting,
		clock:      o.clock,
		skew:       o.skew,
		pad:        padding(o.skew),
		interval:   o.interval,
		freshness:  o.freshness,
		maxRetries: o.maxRetries,
		timeout:    o.timeout,
		attempts:   DefaultMaxAttempts,
		log:        o.log,
		cache:      newCache(o.cacheSize),
		budget:     o.budget,
		keys:       make(map[string]*keyState),
		sweepAt:    1024,
	}
	s.idle = sync.NewCond(&s.mu)
	s.life, s.end = context.WithCancel(context.Background())
	return s, nil
}

// ErrClosed is the cause of a Store method's *driver.OpError after Close.
var ErrClosed = errors.New("store closed")

// Close ends the Store: later calls fail with ErrClosed, requests in flight
// are cancelled, and writes still queued fail (call Flush first to send
// them, as kvbreaker.Breaker.Close does). It returns once no read the Store
// started is left running. The client stays open.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.end()
	s.fetches.Wait()
	return nil
}

// isClosed reports whether Close has been called.
func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
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
func (s *Store) Traits() driver.Traits { return traits(s.skew, s.freshness, s.interval) }

// traits is what a Store with these options declares (Traits).
func traits(skew, freshness, interval time.Duration) driver.Traits {
	return driver.Traits{
		Atomic: false,
		Expiry: driver.ExpiryModel{
			Kind:        driver.ExpiryReaderFiltered,
			Granularity: time.Millisecond,
			Late:        MinTTL + padding(skew) + granularity,
		},
		ReadStaleness:      Propagation + freshness,
		MinWriteInterval:   interval,
		MaxClockSkew:       skew,
		MaxClockSkewOption: "cloudflarekv.WithClockSkew",
	}
}

// padding is how much longer than its TTL KV keeps a record written under
// a clock-skew bound of skew: twice the skew (a writer behind, a reader
// ahead) and KV's whole-second rounding.
func padding(skew time.Duration) time.Duration { return 2*skew + granularity }

// Get implements driver.Store. It answers from the cache when it can (a read
// less than the freshness old, or this store's own queued or just-sent
// write), and otherwise with one GET, shared by concurrent callers for the
// same key. An entry whose logical expiry has passed by the store's clock is
// ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	e, err := s.lookup(ctx, adapter.OpGet, key)
	if err != nil {
		return nil, 0, err
	}
	return s.answer(e)
}

// lookup returns what Get answers from: the cache's entry for key, or one
// shared GET's.
func (s *Store) lookup(ctx context.Context, op, key string) (entry, error) {
	if err := ctx.Err(); err != nil {
		return entry{}, opError(op, key, err)
	}
	if s.isClosed() {
		return entry{}, opError(op, key, ErrClosed)
	}
	full, err := s.fullKey(key)
	if err != nil {
		return entry{}, opError(op, key, err)
	}
	if e, ok := s.cache.get(full, time.Now(), s.freshness); ok {
		return e, nil
	}
	if until, limited := s.backingOff(); limited {
		// KV is up to Propagation stale anyway: an older cached answer is
		// still within the declared ReadStaleness.
		if e, ok := s.cache.get(full, time.Now(), Propagation+s.freshness); ok {
			return e, nil
		}
		return entry{}, opError(op, key, &RateLimitError{Until: until})
	}
	ch := s.reads.DoChan(full, func() (any, error) {
		// Counted under s.mu with the closed check, so Close's Wait
		// never races an Add.
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, ErrClosed
		}
		s.fetches.Add(1)
		s.mu.Unlock()
		defer s.fetches.Done()
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
				return e, nil
			}
		}
		if r.Err != nil {
			return entry{}, opError(op, key, r.Err)
		}
		return r.Val.(entry), nil
	case <-ctx.Done():
		return entry{}, opError(op, key, s.noAnswer(ctx.Err()))
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
// (another goroutine's, concurrent) is merged with it as records: what the
// write changed in the record its caller read, added to the queued one (so
// two failures in one millisecond count twice; a union of instants when the
// store no longer knows that record), uncapped (the next Failure prunes to
// the history limit), the later RestrainedUntil, Probing if either, the
// longer TTL. A
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
		return 0, opError(adapter.OpSwap, key, err)
	}
	if s.isClosed() {
		return 0, opError(adapter.OpSwap, key, ErrClosed)
	}
	full, err := s.fullKey(key)
	if err != nil {
		return 0, opError(adapter.OpSwap, key, err)
	}
	if ttl <= 0 {
		return 0, opError(adapter.OpSwap, key, fmt.Errorf("ttl %v is not positive", ttl))
	}
	w := write{value: clone(value), ttl: ttl, exp: s.clock().Add(ttl).Truncate(time.Millisecond), ver: newVersion(), base: old}
	return s.enqueue(ctx, adapter.OpSwap, key, full, w)
}

// CompareAndDelete implements driver.Store, last writer wins: it deletes key
// whatever version old is. It returns ErrNotFound, without writing, when the
// key is absent (from the cache, or one GET when the cache does not know).
// Deletes are coalesced with writes to the same key as CompareAndSwap says.
func (s *Store) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	if err := ctx.Err(); err != nil {
		return opError(adapter.OpDelete, key, err)
	}
	full, err := s.fullKey(key)
	if err != nil {
		return opError(adapter.OpDelete, key, err)
	}
	gone, cur, err := s.Get(ctx, key)
	if err != nil {
		if errors.Is(err, driver.ErrNotFound) {
			return driver.ErrNotFound
		}
		if oe, ok := err.(*driver.OpError); ok {
			err = oe.Err // the delete's error, not the read's
		}
		return opError(adapter.OpDelete, key, err)
	}
	// The delete remembers what it removed, so that a write computed from
	// that record (a Failure that read it before this Success) brings
	// back none of it.
	_, err = s.enqueue(ctx, adapter.OpDelete, key, full, write{del: true, ver: newVersion(), base: old, goneVer: cur, goneVal: gone})
	return err
}

// Flush implements driver.Flusher: it waits until every queued write has
// been sent (or has failed), or ctx ends. kvbreaker.Breaker.Close(ctx)
// calls it; a program that keeps the Store and not the Breaker calls it
// before exiting, so no recorded failure is left unsent.
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
			return opError(opFlush, "", err)
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

// fullKey returns the KV key name for host key: the key itself, if Workers
// KV accepts it.
func (s *Store) fullKey(key string) (string, error) {
	switch {
	case key == "":
		return "", errors.New("empty key")
	case key == "." || key == "..":
		// In a URL path they would name the directory or its parent.
		return "", errors.New(`the key names "." and ".." are not allowed in Workers KV: wrap the store with kvbreaker.Prefixed`)
	case !utf8.ValidString(key):
		return "", errors.New("key is not valid UTF-8")
	case len(key) > MaxKeyLen:
		return "", fmt.Errorf("key of %d bytes exceeds Workers KV's %d-byte limit", len(key), MaxKeyLen)
	}
	return key, nil
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

// opFlush is the Op of an error of the queued writes' flush
// (driver.OpError.Op); the contract's methods use adapter's Op names.
const opFlush = "flush"

// opError returns err as a *driver.OpError, "cloudflarekv: <op> <key>:
// <cause>"; driver.ErrNotFound passes through bare.
func opError(op, key string, err error) error {
	if errors.Is(err, driver.ErrNotFound) {
		return err
	}
	return &driver.OpError{Backend: "cloudflarekv", Op: op, Key: key, Err: err}
}
