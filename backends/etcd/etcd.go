// Package etcd is a driver.Store over etcd v3 (go.etcd.io/etcd/client/v3).
//
// Keys are stored exactly as the caller gives them (etcd keys are bytes, so
// host keys go in unescaped). To keep a fleet's records apart from others in
// one cluster, wrap the Store: kvbreaker.Prefixed(store, "fleet-a/"). A
// deployment that relied on the former default prefix keeps its records
// with kvbreaker.Prefixed(store, "kvbreaker/").
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
// them. Leases are the adapter's own business: it writes no key but the
// caller's.
//
// Expiry is relative and judged by the leader's clock: the leader checks
// leases every 500 ms, so a key can outlive its TTL by that plus the reuse
// slack; a leader change or server restart extends every lease by up to an
// election timeout. Keys never expire before their TTL. The Store is no
// driver.ClockSampler: etcd's API shows no server clock (a response header
// holds revisions and the raft term, a lease its remaining seconds).
//
// Every call is bounded by its context only (kvbreaker.Breaker bounds each
// with Settings.CallTimeout); the Store sends no request of its own. Errors
// other than driver.ErrNotFound and conflicts are *driver.OpError:
// "etcd: get host.example: context deadline exceeded (via
// http://10.0.0.1:2379)", endpoints without credentials; a call whose
// deadline passed while no endpoint accepted a connection has an
// *driver.UnreachableError as its cause instead ("etcd: get host.example: cannot
// reach etcd at http://10.0.0.1:2379: connection refused"), which still
// matches the context's error. A Store lists keys
// (driver.Lister), reads a key's remaining lease TTL (driver.ExpiryReader:
// driver.NoExpiry for a key another process put without a lease) and owns
// nothing but what Dial made: Close closes that.
//
// A value no Breaker wrote (garbage, empty, an unknown record format, a
// value of 1 MB, a key without a lease) reads as it is, with its
// ModRevision: a Breaker takes it for an undecodable record and replaces
// it on its next write, which puts a lease on the key.
//
// A Store follows a prefix (driver.Follower) as the Kubernetes apiserver
// follows etcd: a linearizable snapshot of the prefix, then a Watch from
// the revision after it, delivering each put and each delete (a lease's
// expiry included) in revision order with the versions Get returns. Every
// heartbeat, a linearizable read of the cluster's revision and a progress
// request on the watch prove how far the feed has come (Synced). A
// compacted history, a member without a leader and any broken watch stream
// are Lost, followed by a new snapshot; a stream is never resumed in
// place. See Store.Follow. A mirror's feed on demand (Store.FollowDemand)
// proves it for the whole fleet instead: a put of the prefix's reserved
// beat key (the prefix followed by a NUL and "kvbreaker-beat", which List
// and the feeds skip), dated by every receiver with its own clock
// (beat.go).
package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// CheckInterval is how often the etcd leader looks for expired leases: a
// key can outlive its lease by this much.
const CheckInterval = 500 * time.Millisecond

// ErrClosed is the cause of a Store method's *driver.OpError after Close.
var ErrClosed = errors.New("store closed")

// backend names the adapter in its errors.
const backend = "etcd"

// Store is a driver.Store in etcd. It is safe for concurrent use. The zero
// value is not usable; call New or Dial.
type Store struct {
	cli     *clientv3.Client
	ownsCli bool
	via     string       // the client's endpoints without credentials, for errors
	minTTL  atomic.Int64 // seconds; the server's minimum lease TTL
	pool    *leasePool
	closed  atomic.Bool

	writes, grants, reused, conflicts atomic.Uint64
}

// options collects the Options of New and Dial.
type options struct {
	minTTL    time.Duration
	policy    reusePolicy
	clock     func() time.Time
	tlsConfig *tls.Config // Dial's only
}

// Option configures a Store.
type Option func(*options)

// WithLeaseReuse sets how much longer than its TTL a key may live so that
// writes can share a lease: fraction of the TTL (default 0.05, from 0 to
// 1), at most max (default 60 s, rounded down to whole seconds). A fraction
// or max of zero turns pooling off: every write grants its own lease. The
// largest slack is part of Traits().Expiry.Late.
func WithLeaseReuse(fraction float64, max time.Duration) Option {
	return func(o *options) {
		o.policy.fraction = fraction
		o.policy.maxSlack = int64(max / time.Second)
	}
}

// WithMaxKeysPerLease bounds how many writes one pooled lease serves
// (default DefaultMaxKeysPerLease; at least 1).
func WithMaxKeysPerLease(n int) Option { return func(o *options) { o.policy.maxKeys = n } }

// WithMinTTL declares the server's minimum lease TTL (etcd grants at least
// ceil(1.5 × election timeout), 2 s by default), so New need not ask the
// server. A larger minimum found in a later grant (or by Dial, which always
// asks) still raises it.
func WithMinTTL(d time.Duration) Option { return func(o *options) { o.minTTL = d } }

// WithTLSConfig is Dial's TLS configuration: the authority that signed the
// members' certificates (RootCAs) and a client certificate for a cluster
// that requires one (--client-cert-auth). Without it Dial speaks plain
// text. New refuses it: a client made elsewhere carries its own
// clientv3.Config.TLS.
func WithTLSConfig(cfg *tls.Config) Option { return func(o *options) { o.tlsConfig = cfg } }

// newOptions applies opts over the defaults and reports every invalid one
// (and the problems the caller found already) as a *driver.OptionError.
// dial says whether the caller is Dial, which alone takes WithTLSConfig.
func newOptions(opts []Option, problems *adapter.Problems, dial bool) (options, error) {
	o := options{
		policy: reusePolicy{
			fraction: DefaultReuseFraction,
			maxSlack: int64(DefaultMaxReuse / time.Second),
			maxKeys:  DefaultMaxKeysPerLease,
		},
		clock: time.Now,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if f := o.policy.fraction; f < 0 || f > 1 || math.IsNaN(f) {
		problems.Add("WithLeaseReuse fraction", f, "give a share of the TTL from 0 to 1")
	}
	if o.policy.maxSlack < 0 {
		problems.Add("WithLeaseReuse maximum", time.Duration(o.policy.maxSlack)*time.Second, "give 0 (no pooling) or a positive duration")
	}
	if o.policy.maxKeys < 1 {
		problems.Add("WithMaxKeysPerLease", o.policy.maxKeys, "give 1 or more")
	}
	if o.minTTL < 0 {
		problems.Add("WithMinTTL", o.minTTL, "give 0 (ask the server) or a positive duration")
	}
	if o.tlsConfig != nil && !dial {
		problems.Add("WithTLSConfig", "given to New", "set TLS in the clientv3.Config (New does not make the client), or call Dial")
	}
	return o, problems.Err()
}

// probeTimeout bounds New's question to the server about its minimum TTL.
const probeTimeout = 5 * time.Second

// New returns a Store over cli, which the caller keeps and closes. Unless
// WithMinTTL is given, New grants (and revokes) a 1-second lease to learn the
// server's minimum TTL, within the client's context and 5 s; it fails if the
// server does not answer, as Dial does (errors.Is(err, driver.ErrUnreachable) when
// no endpoint could be reached). Invalid options are *driver.OptionError,
// all of them joined.
func New(cli *clientv3.Client, opts ...Option) (*Store, error) {
	problems := adapter.Problems{Backend: backend}
	if cli == nil {
		problems.Add("client", "nil", "pass a *clientv3.Client, or call Dial")
	}
	o, err := newOptions(opts, &problems, false)
	if err != nil {
		return nil, err
	}
	s := newStore(cli, false, o)
	if o.minTTL > 0 {
		return s, nil
	}
	ctx, cancel := context.WithTimeout(cli.Ctx(), probeTimeout)
	defer cancel()
	if err := s.reach(ctx, "new", cli.Endpoints(), nil); err != nil {
		return nil, err
	}
	return s, nil
}

// String names the cluster the Store talks to, for a tool's output or a
// log: "etcd at https://etcd-1:2379,https://etcd-2:2379", the client's
// endpoints without user information, query or fragment.
func (s *Store) String() string { return "etcd at " + s.via }

func newStore(cli *clientv3.Client, owns bool, o options) *Store {
	s := &Store{cli: cli, ownsCli: owns, via: strings.Join(redactEndpoints(cli.Endpoints()), ",")}
	s.pool = &leasePool{policy: o.policy, clock: o.clock, grant: s.grant, slots: make(map[int64]*leaseSlot)}
	if o.minTTL > 0 {
		s.minTTL.Store(adapter.CeilSeconds(o.minTTL))
	}
	return s
}

// probeMinTTL grants a 1-second lease: the server raises the TTL of a grant
// to its minimum, so the granted TTL is the minimum.
func (s *Store) probeMinTTL(ctx context.Context) error {
	resp, err := s.cli.Grant(ctx, 1)
	if err != nil {
		return err
	}
	s.raiseMinTTL(max(1, resp.TTL))
	if _, err := s.cli.Revoke(ctx, resp.ID); err != nil {
		return err
	}
	return nil
}

// raiseMinTTL raises the known minimum TTL to sec seconds if that is more.
func (s *Store) raiseMinTTL(sec int64) {
	for {
		cur := s.minTTL.Load()
		if sec <= cur || s.minTTL.CompareAndSwap(cur, sec) {
			return
		}
	}
}

// Close releases the Store; later calls fail with ErrClosed. It closes the
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

// MinTTL returns the server's minimum lease TTL as far as the store knows.
func (s *Store) MinTTL() time.Duration { return time.Duration(s.minTTL.Load()) * time.Second }

// Traits declares atomic compare-and-swap, linearizable reads, relative expiry on
// the leader's clock with 1 s granularity, never early, late by up to the
// 500 ms expiry check plus the lease-reuse slack (a leader change or restart
// extends leases further, by up to an election timeout).
func (s *Store) Traits() driver.Traits {
	return traits(s.MinTTL(), time.Duration(s.pool.policy.maxSlack)*time.Second)
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

// Get implements driver.Store with a linearizable read.
func (s *Store) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	if s.closed.Load() {
		return nil, 0, opError(adapter.OpGet, key, ErrClosed)
	}
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return nil, 0, s.callError(adapter.OpGet, key, err)
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
// (which the caller would take for another worker's): clientv3 retries a
// mutation only when no connection was available, before sending
// (isSafeRetryMutableRPC in client/v3/retry.go), and gRPC retries
// transparently only streams the server never saw. A Txn whose answer is
// lost (reset, timeout) returns its transport error within ctx, and the
// write may have been applied: the caller must treat the outcome as unknown
// (TestTxnAnswerLostIsNotRetried). The one resend below follows
// ErrLeaseNotFound, which etcd returns for a Txn it refused whole.
func (s *Store) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	const op = adapter.OpSwap
	if err := s.gate().Swap(key, ttl); err != nil {
		return 0, err
	}
	if old > math.MaxInt64 {
		// No revision is this large: the compare cannot succeed.
		return 0, s.conflictFromGet(ctx, op, key)
	}
	ttlSec := max(adapter.CeilSeconds(ttl), s.minTTL.Load())
	var cmp clientv3.Cmp
	if old == driver.NoVersion {
		cmp = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	} else {
		cmp = clientv3.Compare(clientv3.ModRevision(key), "=", int64(old))
	}
	// A lease the server no longer knows (revoked, or lost with the data)
	// fails the put; drop it and grant afresh, once.
	for attempt := 0; ; attempt++ {
		id, granted, err := s.pool.get(ctx, ttlSec)
		if err != nil {
			return 0, s.callError(op, key, err)
		}
		if attempt == 0 {
			s.writes.Add(1)
		}
		if !granted {
			s.reused.Add(1)
		}
		resp, err := s.cli.Txn(ctx).
			If(cmp).
			Then(clientv3.OpPut(key, string(value), clientv3.WithLease(id))).
			Else(clientv3.OpGet(key)).
			Commit()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 0 {
			s.pool.forget(ttlSec, id)
			continue
		}
		if err != nil {
			return 0, s.callError(op, key, err)
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
	const op = adapter.OpDelete
	if s.closed.Load() {
		return opError(op, key, ErrClosed)
	}
	if old > math.MaxInt64 {
		return s.conflictFromGet(ctx, op, key)
	}
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", int64(old))).
		Then(clientv3.OpDelete(key)).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return s.callError(op, key, err)
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

// conflictFromGet reports a conflict for a version that cannot exist, with
// the key's current value; a failed read is op's error.
func (s *Store) conflictFromGet(ctx context.Context, op, key string) error {
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return s.callError(op, key, err)
	}
	s.conflicts.Add(1)
	if len(resp.Kvs) == 0 {
		return &driver.ConflictError{}
	}
	return &driver.ConflictError{Value: resp.Kvs[0].Value, Version: driver.Version(resp.Kvs[0].ModRevision)}
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
		s.raiseMinTTL(resp.TTL)
	}
	return resp.ID, resp.TTL, nil
}

// opError is the shape of every error but ErrNotFound and conflicts.
// gate is what Follow, List and CompareAndSwap check before they contact
// the server.
func (s *Store) gate() adapter.Gate {
	return adapter.Gate{Closed: s.closed.Load, ErrClosed: ErrClosed, Wrap: opError}
}

func opError(op, key string, err error) error {
	return &driver.OpError{Backend: backend, Op: op, Key: key, Err: err}
}

// callError is opError for a failed request: the cause names the endpoints
// the request could have gone to.
// A request whose deadline passed may have found no endpoint accepting
// connections: etcd's client retries them until the context ends, and says
// only that it ended. A brief dial of each endpoint (checkConnect) tells
// that case, which is then an *driver.UnreachableError (matching driver.ErrUnreachable
// and still the context's error), as driver's doc promises.
func (s *Store) callError(op, key string, err error) error {
	cause := via(err, s.via)
	if errors.Is(err, context.DeadlineExceeded) {
		eps := s.cli.Endpoints()
		ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
		refused := checkConnect(ctx, eps, redactEndpoints(eps))
		cancel()
		if ue, ok := errors.AsType[*driver.UnreachableError](refused); ok {
			ue.Err = errors.Join(err, ue.Err)
			cause = ue
		}
	}
	return opError(op, key, cause)
}

// via is a request's error and the endpoints it went to; it unwraps to
// the error (a context error, an rpctypes error, …).
func via(err error, endpoints string) error {
	return adapter.Explained(err, "%v (via %s)", err, endpoints)
}

// redactEndpoints is redactEndpoint of each.
func redactEndpoints(eps []string) []string {
	red := make([]string, len(eps))
	for i, ep := range eps {
		red[i] = redactEndpoint(ep)
	}
	return red
}

// redactEndpoint drops any user information ("user:pass@") from an
// endpoint, and its query and fragment, which may carry a token
// ("?password=…"): etcd's client reads neither.
func redactEndpoint(ep string) string {
	ep, _, _ = strings.Cut(ep, "#")
	ep, _, _ = strings.Cut(ep, "?")
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
