// Package etcd is a driver.Store over etcd v3 (go.etcd.io/etcd/client/v3).
//
// Compare-and-swap is one Txn: If(ModRevision(key) == version), or
// If(CreateRevision(key) == 0) to create, Then a put with a lease, Else a
// get — so a lost compare returns a *driver.ConflictError carrying the key's
// current value and revision in the same round trip. The version is the
// key's ModRevision. Reads are linearizable.
//
// Time to live is an etcd lease, rounded up to whole seconds and never below
// the server's minimum (learnt from the server: a granted TTL can exceed the
// request). Leases are pooled as the Kubernetes apiserver pools them: a write
// reuses the previous lease of its TTL while that lease outlives the TTL by
// at most a bounded slack (5% of the TTL, at most 60 s, by default), so a
// fleet writing thousands of records makes a handful of grants. Stats counts
// them.
//
// Expiry is relative and judged by the leader's clock: the leader checks
// leases every 500 ms, so a key can outlive its TTL by that plus the reuse
// slack; a leader change or server restart extends every lease by up to an
// election timeout. Keys never expire before their TTL.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Defaults of a Store's options.
const (
	// DefaultPrefix is prepended to every host key.
	DefaultPrefix = "kvbreaker/"
	// DefaultOpTimeout bounds each call to etcd within the caller's
	// context, so a dead cluster never blocks a caller without a deadline.
	DefaultOpTimeout = 5 * time.Second
	// CheckInterval is how often the etcd leader looks for expired leases:
	// a key can outlive its lease by this much.
	CheckInterval = 500 * time.Millisecond
)

// ErrClosed is returned by a Store's methods after Close.
var ErrClosed = errors.New("etcd: store closed")

// Store is a driver.Store in etcd. It is safe for concurrent use. The zero
// value is not usable; call New or Dial.
type Store struct {
	cli       *clientv3.Client
	ownsCli   bool
	prefix    string
	opTimeout time.Duration
	minTTL    atomic.Int64 // seconds; the server's minimum lease TTL
	pool      *leasePool
	closed    atomic.Bool

	writes, grants, reused, conflicts atomic.Uint64
}

// config collects the options.
type config struct {
	prefix    string
	opTimeout time.Duration
	minTTL    time.Duration
	policy    reusePolicy
	clock     func() time.Time
}

// Option configures a Store.
type Option func(*config)

// WithPrefix puts every key under prefix (default DefaultPrefix). Keys are
// bytes to etcd, so host keys are appended unescaped; two Stores with
// different prefixes, neither a prefix of the other, never see each other's
// keys.
func WithPrefix(prefix string) Option { return func(c *config) { c.prefix = prefix } }

// WithOpTimeout bounds each etcd call (default DefaultOpTimeout); the
// caller's context deadline applies too, and the earlier one wins. Zero or
// negative leaves only the caller's context.
func WithOpTimeout(d time.Duration) Option { return func(c *config) { c.opTimeout = d } }

// WithLeaseReuse sets how much longer than its TTL a key may live so that
// writes can share a lease: fraction of the TTL (default 0.05), at most max
// (default 60 s, rounded down to whole seconds). A fraction or max of zero
// turns pooling off: every write grants its own lease. The largest slack is
// part of Traits().Expiry.Late.
func WithLeaseReuse(fraction float64, max time.Duration) Option {
	return func(c *config) {
		c.policy.fraction = fraction
		c.policy.maxSlack = int64(max / time.Second)
	}
}

// WithMaxKeysPerLease bounds how many writes one pooled lease serves
// (default DefaultMaxKeysPerLease).
func WithMaxKeysPerLease(n int) Option { return func(c *config) { c.policy.maxKeys = n } }

// WithMinTTL declares the server's minimum lease TTL (etcd grants at least
// ceil(1.5 × election timeout), 2 s by default), so New need not ask the
// server. A larger minimum found in a later grant still raises it.
func WithMinTTL(d time.Duration) Option { return func(c *config) { c.minTTL = d } }

func newConfig(opts []Option) (config, error) {
	c := config{
		prefix:    DefaultPrefix,
		opTimeout: DefaultOpTimeout,
		policy: reusePolicy{
			fraction: DefaultReuseFraction,
			maxSlack: int64(DefaultMaxReuse / time.Second),
			maxKeys:  DefaultMaxKeysPerLease,
		},
		clock: time.Now,
	}
	for _, o := range opts {
		o(&c)
	}
	var errs []error
	if c.policy.fraction < 0 || c.policy.fraction > 1 || math.IsNaN(c.policy.fraction) {
		errs = append(errs, fmt.Errorf("lease reuse fraction %v: want 0 to 1", c.policy.fraction))
	}
	if c.policy.maxSlack < 0 {
		errs = append(errs, fmt.Errorf("lease reuse maximum %ds: want 0 or more", c.policy.maxSlack))
	}
	if c.policy.maxKeys < 1 {
		errs = append(errs, fmt.Errorf("max keys per lease %d: want at least 1", c.policy.maxKeys))
	}
	if c.minTTL < 0 {
		errs = append(errs, fmt.Errorf("min TTL %v: want 0 (ask the server) or more", c.minTTL))
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("etcd: invalid options:\n%w", errors.Join(errs...))
	}
	return c, nil
}

// probeTimeout bounds New's question to the server about its minimum TTL.
const probeTimeout = 5 * time.Second

// New returns a Store over cli, which the caller keeps and closes. Unless
// WithMinTTL is given, New grants (and revokes) a 1-second lease to learn the
// server's minimum TTL, within the client's context and 5 s; it fails if the
// server does not answer.
func New(cli *clientv3.Client, opts ...Option) (*Store, error) {
	if cli == nil {
		return nil, errors.New("etcd: New needs a client")
	}
	ctx, cancel := context.WithTimeout(cli.Ctx(), probeTimeout)
	defer cancel()
	return newStore(ctx, cli, false, opts)
}

func newStore(ctx context.Context, cli *clientv3.Client, owns bool, opts []Option) (*Store, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	s := &Store{cli: cli, ownsCli: owns, prefix: c.prefix, opTimeout: c.opTimeout}
	s.pool = &leasePool{policy: c.policy, clock: c.clock, grant: s.grant, slots: make(map[int64]*leaseSlot)}
	if c.minTTL > 0 {
		s.minTTL.Store(ceilSeconds(c.minTTL))
		return s, nil
	}
	if err := s.probeMinTTL(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// probeMinTTL grants a 1-second lease: the server raises the TTL of a grant
// to its minimum, so the granted TTL is the minimum.
func (s *Store) probeMinTTL(ctx context.Context) error {
	resp, err := s.cli.Grant(ctx, 1)
	if err != nil {
		return s.opError("grant", "", err)
	}
	s.minTTL.Store(max(1, resp.TTL))
	if _, err := s.cli.Revoke(ctx, resp.ID); err != nil {
		return s.opError("revoke", "", err)
	}
	return nil
}

// Close releases the Store; later calls return ErrClosed. It closes the
// client only when Dial made it. Keys and leases stay in etcd until their
// TTL.
func (s *Store) Close() error {
	if s.closed.Swap(true) || !s.ownsCli {
		return nil
	}
	return s.cli.Close()
}

// Client returns the etcd client the store uses.
func (s *Store) Client() *clientv3.Client { return s.cli }

// Prefix returns the key prefix.
func (s *Store) Prefix() string { return s.prefix }

// MinTTL returns the server's minimum lease TTL as far as the store knows.
func (s *Store) MinTTL() time.Duration { return time.Duration(s.minTTL.Load()) * time.Second }

// Traits declares atomic compare-and-swap, linearizable reads, relative expiry on
// the leader's clock with 1 s granularity, never early, late by up to the
// 500 ms expiry check plus the lease-reuse slack (a leader change or restart
// extends leases further, by up to an election timeout).
func (s *Store) Traits() driver.Traits {
	return driver.Traits{
		Atomic: true,
		Expiry: driver.ExpiryModel{
			Kind:        driver.ExpiryRelative,
			Granularity: time.Second,
			MinTTL:      s.MinTTL(),
			Late:        CheckInterval + time.Duration(s.pool.policy.maxSlack)*time.Second,
		},
	}
}

// Stats counts a Store's work since it was made.
type Stats struct {
	// Writes is the number of compare-and-swaps sent to etcd (won or
	// lost), each with a lease.
	Writes uint64
	// Grants is the number of leases granted for them (not counting New's
	// one-time minimum-TTL probe).
	Grants uint64
	// Reused is the number of writes served by a pooled lease.
	Reused uint64
	// Conflicts is the number of compare-and-swaps and compare-and-deletes
	// that lost.
	Conflicts uint64
}

// GrantsPer1000Writes is Grants per 1,000 Writes (0 with no writes). With
// pooling, one grant serves up to DefaultMaxKeysPerLease writes of one TTL
// within its reuse slack (60 s for TTLs of 20 min or more): about 1 per 1,000
// writes while writes are dense, 1 per slack while they are sparse.
func (st Stats) GrantsPer1000Writes() float64 {
	if st.Writes == 0 {
		return 0
	}
	return 1000 * float64(st.Grants) / float64(st.Writes)
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	return Stats{Writes: s.writes.Load(), Grants: s.grants.Load(), Reused: s.reused.Load(), Conflicts: s.conflicts.Load()}
}

func (s *Store) key(host string) string { return s.prefix + host }

// opContext bounds one call by the store's op timeout.
func (s *Store) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.opTimeout > 0 {
		return context.WithTimeout(ctx, s.opTimeout)
	}
	return context.WithCancel(ctx)
}

// Get implements driver.Store with a linearizable read.
func (s *Store) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	if s.closed.Load() {
		return nil, 0, s.opError("get", key, ErrClosed)
	}
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	resp, err := s.cli.Get(ctx, s.key(key))
	if err != nil {
		return nil, 0, s.opError("get", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, driver.NoVersion, driver.ErrNotFound
	}
	kv := resp.Kvs[0]
	return kv.Value, driver.Version(kv.ModRevision), nil
}

// CompareAndSwap implements driver.Store: one Txn that puts value with a
// pooled lease if key's ModRevision is old (or, for driver.NoVersion, if key
// does not exist), and otherwise returns a *driver.ConflictError with the
// current value and revision read in the same transaction. The new version
// is the revision of the put.
//
// The Txn is sent once, so a conflict never carries this call's own write
// (#12.3): clientv3 retries a mutation only when no connection was
// available, before sending (isSafeRetryMutableRPC in client/v3/retry.go),
// and gRPC retries transparently only streams the server never saw. A Txn
// whose answer is lost (reset, timeout) returns its transport error within
// ctx and the op timeout, and the write may have been applied: the caller
// must treat the outcome as unknown (TestTxnAnswerLostIsNotRetried). The
// one resend below follows ErrLeaseNotFound, which etcd returns for a Txn
// it refused whole.
func (s *Store) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	if s.closed.Load() {
		return 0, s.opError("put", key, ErrClosed)
	}
	if ttl <= 0 {
		return 0, s.opError("put", key, fmt.Errorf("ttl %v is not positive", ttl))
	}
	if old > math.MaxInt64 {
		// No revision is this large: the compare cannot succeed.
		return s.conflictFromGet(ctx, key)
	}
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	ttlSec := max(ceilSeconds(ttl), s.minTTL.Load())
	k := s.key(key)
	var cmp clientv3.Cmp
	if old == driver.NoVersion {
		cmp = clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
	} else {
		cmp = clientv3.Compare(clientv3.ModRevision(k), "=", int64(old))
	}
	// A lease the server no longer knows (revoked, or lost with the data)
	// fails the put; drop it and grant afresh, once.
	for attempt := 0; ; attempt++ {
		id, granted, err := s.pool.get(ctx, ttlSec)
		if err != nil {
			return 0, s.opError("put", key, err)
		}
		if attempt == 0 {
			s.writes.Add(1)
		}
		if !granted {
			s.reused.Add(1)
		}
		resp, err := s.cli.Txn(ctx).
			If(cmp).
			Then(clientv3.OpPut(k, string(value), clientv3.WithLease(id))).
			Else(clientv3.OpGet(k)).
			Commit()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 0 {
			s.pool.forget(ttlSec, id)
			continue
		}
		if err != nil {
			return 0, s.opError("put", key, err)
		}
		if resp.Succeeded {
			return driver.Version(resp.Header.Revision), nil
		}
		return 0, s.conflict(resp)
	}
}

// CompareAndDelete implements driver.Store: one Txn that deletes key if its
// ModRevision is old, and otherwise reads it, returning driver.ErrNotFound
// when it is absent and a *driver.ConflictError with its current value and
// revision when another version is there. Like CompareAndSwap it sends its
// Txn once, so ErrNotFound always means another writer deleted the key, and
// a lost answer is a transport error (outcome unknown).
func (s *Store) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	if s.closed.Load() {
		return s.opError("delete", key, ErrClosed)
	}
	if old > math.MaxInt64 {
		_, err := s.conflictFromGet(ctx, key)
		return err
	}
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	k := s.key(key)
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(k), "=", int64(old))).
		Then(clientv3.OpDelete(k)).
		Else(clientv3.OpGet(k)).
		Commit()
	if err != nil {
		return s.opError("delete", key, err)
	}
	if resp.Succeeded {
		// old == NoVersion compares equal to an absent key.
		if len(resp.Responses) == 0 || resp.Responses[0].GetResponseDeleteRange().GetDeleted() == 0 {
			return driver.ErrNotFound
		}
		return nil
	}
	err = s.conflict(resp)
	if ce, ok := err.(*driver.ConflictError); ok && ce.Version == driver.NoVersion {
		return driver.ErrNotFound
	}
	return err
}

// conflict builds the *driver.ConflictError from a failed Txn's Else get.
func (s *Store) conflict(resp *clientv3.TxnResponse) error {
	s.conflicts.Add(1)
	ce := &driver.ConflictError{}
	if len(resp.Responses) > 0 {
		if r := resp.Responses[0].GetResponseRange(); r != nil && len(r.Kvs) > 0 {
			ce.Value = r.Kvs[0].Value
			ce.Version = driver.Version(r.Kvs[0].ModRevision)
		}
	}
	return ce
}

// conflictFromGet reports a conflict for a version that cannot exist.
func (s *Store) conflictFromGet(ctx context.Context, key string) (driver.Version, error) {
	v, ver, err := s.Get(ctx, key)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		s.conflicts.Add(1)
		return 0, &driver.ConflictError{}
	case err != nil:
		return 0, err
	}
	s.conflicts.Add(1)
	return 0, &driver.ConflictError{Value: v, Version: ver}
}

// grant asks etcd for a lease of ttlSec seconds and learns the server's
// minimum from the answer.
func (s *Store) grant(ctx context.Context, ttlSec int64) (clientv3.LeaseID, int64, error) {
	resp, err := s.cli.Grant(ctx, ttlSec)
	if err != nil {
		return clientv3.NoLease, 0, err
	}
	s.grants.Add(1)
	if resp.TTL > ttlSec {
		// The server raised the TTL: its minimum is at least this.
		for {
			cur := s.minTTL.Load()
			if resp.TTL <= cur || s.minTTL.CompareAndSwap(cur, resp.TTL) {
				break
			}
		}
	}
	return resp.ID, resp.TTL, nil
}

// ceilSeconds rounds d up to whole seconds, at least 1.
func ceilSeconds(d time.Duration) int64 {
	sec := int64(d / time.Second)
	if d%time.Second != 0 {
		sec++
	}
	return max(1, sec)
}

// OpError is the error of a failed etcd call: "etcd: <op> <key> via
// <endpoints>: <cause>". Endpoints are shown without user information, so
// credentials never appear.
type OpError struct {
	Op        string
	Key       string
	Endpoints []string
	Err       error
}

// Error formats the error as "etcd: <op> <key> via <endpoints>: <cause>".
func (e *OpError) Error() string {
	var b strings.Builder
	b.WriteString("etcd: ")
	b.WriteString(e.Op)
	if e.Key != "" {
		fmt.Fprintf(&b, " %q", e.Key)
	}
	if len(e.Endpoints) > 0 {
		b.WriteString(" via ")
		b.WriteString(strings.Join(e.Endpoints, ","))
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }

func (s *Store) opError(op, key string, err error) error {
	eps := s.cli.Endpoints()
	red := make([]string, len(eps))
	for i, ep := range eps {
		red[i] = redactEndpoint(ep)
	}
	return &OpError{Op: op, Key: key, Endpoints: red, Err: err}
}

// redactEndpoint drops any user information ("user:pass@") from an
// endpoint.
func redactEndpoint(ep string) string {
	scheme, rest, ok := strings.Cut(ep, "://")
	if !ok {
		scheme, rest = "", ep
	}
	host, path, _ := strings.Cut(rest, "/")
	if i := strings.LastIndex(host, "@"); i >= 0 {
		host = host[i+1:]
	}
	out := host
	if path != "" {
		out += "/" + path
	}
	if ok {
		out = scheme + "://" + out
	}
	return out
}
