// Package redis is a driver.Store over Redis with go-redis v9
// (github.com/redis/go-redis/v9). It takes a redis.UniversalClient, so one
// adapter serves a single server, Sentinel (a failover client) and Cluster.
// Valkey speaks the same protocol and should work alike; it is not tested
// here.
//
// # Records
//
// Each key is one Redis hash under the caller's key, unchanged (wrap the
// Store in kvbreaker.Prefixed to keep a fleet's records apart): field v is
// the value, n the version, w the id of the write that made it. Every
// operation touches that one key, so it is single-slot and Cluster needs
// nothing special. Compare-and-swap and compare-and-delete are one Lua
// script each, run with go-redis' Script (EVALSHA, falling back to EVAL on
// NOSCRIPT): one round trip that compares, writes, and on a conflict returns
// the key's current value and version (a *driver.ConflictError).
//
// # Versions
//
// A version is never reused for a key, also across delete, re-create and
// expiry, without a second key (which in a Cluster would be another slot):
// a write's version is max(previous version + 1, the server's TIME in
// microseconds). Compare-and-delete leaves a tombstone (the hash without its
// value, keeping its version and its remaining TTL), so a re-create while
// the record's TTL runs continues from its version; once the TTL has
// passed, the key is gone and the server's clock is past every version it
// gave (a version is at most its write's instant, and the TTL is at least
// 1 ms). A backward step of the server's wall clock by more than the time
// since a key's last write could repeat a version for that key; Redis has
// no monotonic clock a script can read. Tombstones read as absent and are
// not listed; keys of other types are (see "Foreign data").
//
// # Foreign data
//
// A key that holds no record (a string, list, set, sorted set or stream
// key; a hash with v whose n is missing, not a number, zero, negative, not
// in canonical form or at least 2^53, which a script's doubles cannot count
// on from) is read as a value (the string's bytes, the hash's v, or empty,
// which a Breaker takes as an undecodable record) with a version that names
// exactly that content: 2^63 plus 60 bits of the SHA-1 of the key's type
// and content, above every record's version. A compare-and-swap with it
// replaces the key whole (its type, its fields, its TTL or lack of one) if
// the content is still the same, and conflicts otherwise, in one script; a
// compare-and-delete leaves a tombstone, with TombstoneTTL if the key had
// no TTL. A hash without v reads as absent (a tombstone), and the next
// write replaces it whole too. Nothing at a key therefore stops a write:
// a Breaker's circuit opens over whatever another process left there.
// Reading foreign data costs a second round trip (a script that reads the
// key whole); records cost one, as before.
//
// # Expiry
//
// Every write sets its own TTL with PEXPIRE, in milliseconds rounded up:
// relative expiry on the server's clock, 1 ms granularity, never early.
// Redis never returns an expired key (it checks on every access), though an
// expired key may occupy memory until its lazy or sampled deletion.
//
// # Lost answers
//
// go-redis retries a command whose connection broke (EOF, reset) up to the
// client's MaxRetries (3 by default), so a script that the server applied
// may run again. Every write carries a random 128-bit id, stored in the
// record: a rerun that finds its own id reports what the first run did
// (the new version, or the delete) rather than a conflict with itself. A
// write whose answer was lost and not retried returns the transport error:
// its outcome is unknown.
//
// A delete's tombstone keeps the record's remaining TTL, which may end
// before a rerun of the delete arrives. The rerun then finds the key
// absent and returns driver.ErrNotFound rather than success: what the
// delete returns when the record expired before it (which the record,
// whose TTL the tombstone kept, would have done at the same instant), and
// the key is absent, as the delete left it; a Breaker takes either as the
// record gone. The rerun cannot delete a record written since: the key's
// next version comes from the server's clock, past the deleted version
// (see Versions), so the rerun conflicts with it. Nor can it bring a record
// back, as the delete's script writes nothing but a tombstone.
//
// # Reads from replicas
//
// Reads go wherever the client sends read-only commands: the primary by
// default. A client that reads from replicas (ClusterOptions.ReadOnly,
// RouteByLatency or RouteRandomly, a failover client with ReplicaOnly)
// serves reads as old as the replicas' lag; declare it with
// WithReplicaReads, which sets Traits().ReadStaleness. New refuses a
// ClusterClient that reads from replicas without it.
//
// # Following
//
// A Store follows a prefix (driver.Follower) with CLIENT TRACKING in BCAST
// mode on that prefix, turned on by the connection subscribed to
// __redis__:invalidate and redirected to itself, so that the tracking
// lasts exactly as long as the connection that receives its
// invalidations. Its connections belong to a client Follow makes
// from the Store's client's options (same server, credentials, TLS and
// database) with RESP2, no retries and the name FollowClientName (unless
// the client sets one): in RESP3 Redis would send invalidations as push
// frames, which go-redis' PubSub does not read; in RESP2 they are
// messages, in the same stream as the answers to the PINGs sent there.
// Tracking is enabled before the snapshot (SCAN, then each key read as Get
// reads it: a tombstone, or a hash without v, is not delivered; foreign
// data is, with its version), so a write the snapshot missed is
// invalidated; each invalidated key is delivered as driver.ChangeStale (a
// write, a delete, an expiry once Redis has deleted the key, which it does
// when its sampling finds it or on access): Follow reads nothing after the
// snapshot, and a Breaker's mirror reads such a key once, when it next
// needs it. Two writes close together may arrive as one Stale. Every
// heartbeat/2 a PING goes to the subscriber: Redis answers it
// after every invalidation it queued before; once the answer arrives, the
// invalidations before it have been delivered and the follow client has
// made no connection since the session's (a reconnection carries no
// tracking), Follow sends Synced{At: when the PING was sent}.
//
// FollowDemand (driver.DemandFollower, what a Breaker's mirror uses) PINGs
// once per session; after that a beat is a PUBLISH on __redis__:invalidate,
// sent only when its caller asks and its newest Synced is a heartbeat old,
// which every follower of the server receives after the invalidations
// queued for it before: one beat serves a fleet. It carries the server's
// clock, a lower bound of it when the PUBLISH ran that the sender derives
// from a TIME sample and its monotonic clock, and each follower converts it
// to its own clock with a TIME sample of its own (each sample serves 30 s;
// 500 ppm of drift is allowed for); a beat that converts to an instant
// after its own arrival is dropped. A follower asked for a beat waits a
// random extra up to an eighth of the heartbeat, so that followers asked at
// once do not all send one. When the fleet's newest check is four
// heartbeats old a beat's sender checks its marker key first (wipe.go),
// and announces a swapped database to every follower of it. A user refused PUBLISH beats with PINGs of its own.
//
// Lost, then a new
// session (tracking, snapshot, Synced), follows: the subscriber failing or
// closing, a PING or a beat of its own unanswered within the heartbeat
// (the call timeout on demand), a null invalidation (FLUSHALL, FLUSHDB;
// go-redis reports it as an unsupported pubsub payload), the session's
// marker key gone (SWAPDB: ErrFeedWiped, wipe.go). Follow works
// with a *redis.Client of one server; a Cluster (tracking is per node), a
// Ring, a failover client (its connections may stay on a demoted master)
// and a Store declared WithReplicaReads get errors.ErrUnsupported. Close
// ends every running Follow.
//
// Errors other than driver.ErrNotFound and conflicts are *driver.OpError:
// "redis: get host.example: <cause>". A Store lists keys (driver.Lister)
// with SCAN, across the masters of a Cluster, and closes only a client that
// Dial made.
// It reads the server's clock (driver.ClockSampler) with TIME, to the
// microsecond.
package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// backend names the adapter in its errors.
const backend = "redis"

// Hash fields of a record.
const (
	FieldValue   = "v" // the value; absent in a tombstone
	FieldVersion = "n" // the version, in decimal
	FieldWriter  = "w" // the id of the write that made the record or tombstone
)

// ErrClosed is the cause of a Store method's *driver.OpError after Close.
var ErrClosed = errors.New("store closed")

// Store is a driver.Store in Redis. It is safe for concurrent use. The zero
// value is not usable; call New or Dial.
type Store struct {
	c         goredis.UniversalClient
	owns      bool
	staleness time.Duration
	closed    atomic.Bool

	// waitReplicas > 0: every write is followed by WAIT on its connection
	// (WithWaitReplicas).
	waitReplicas int
	waitTimeout  time.Duration

	// Running Follow calls, which Close cancels and waits for.
	mu      sync.Mutex
	cancels map[*context.CancelFunc]struct{}
	follows sync.WaitGroup
}

type options struct {
	replicaLag    time.Duration
	replicaLagSet bool
	waitReplicas  int
	waitTimeout   time.Duration
	waitSet       bool
	tlsConfig     *tls.Config // Dial's only
	clusterCheck  bool        // Dial's only
}

// Option configures a Store.
type Option func(*options)

// WithReplicaReads declares that the client reads from replicas, whose
// answers may be as old as maxLag (the replication lag you monitor, e.g.
// through INFO replication's lag, plus the time a failover takes to notice
// a stalled replica): Traits().ReadStaleness becomes maxLag, which the
// conformance suite and `kvbreaker check` hold the store to. Writes and
// their compares always run on the primary.
func WithReplicaReads(maxLag time.Duration) Option {
	return func(o *options) { o.replicaLag, o.replicaLagSet = maxLag, true }
}

// WithWaitReplicas makes every compare-and-swap and compare-and-delete
// wait until n replicas have acknowledged it (Redis's WAIT n timeout, sent
// on the write's connection in the same round trip) before it counts as
// done. Redis replicates asynchronously: a write the primary acknowledged
// but no replica received is lost when a replica is promoted (Sentinel or
// Cluster failover). With this option such a write returns an error
// matching ErrNotReplicated instead of success; it was applied on the
// primary, so its outcome is unknown, as for a lost answer. The cost is a
// replication round trip on every write, and writes fail while fewer than
// n replicas answer within timeout (docs/backends.md has the figures). n
// is at least 1 and timeout positive (a WAIT without one blocks until the
// call's context ends).
func WithWaitReplicas(n int, timeout time.Duration) Option {
	return func(o *options) { o.waitReplicas, o.waitTimeout, o.waitSet = n, timeout, true }
}

// ErrNotReplicated matches (errors.Is) the error of a write that the
// primary applied but fewer replicas than WithWaitReplicas asks for
// acknowledged in time; the cause is a *NotReplicatedError.
var ErrNotReplicated = errors.New("write not acknowledged by enough replicas")

// NotReplicatedError says how many replicas acknowledged a write that
// WithWaitReplicas waited for: fewer than Want within Timeout.
type NotReplicatedError struct {
	Got, Want int
	Timeout   time.Duration
}

func (e *NotReplicatedError) Error() string {
	return fmt.Sprintf("applied on the primary, acknowledged by %d of the %d replicas WithWaitReplicas asks for within %v (it may be lost if a replica is promoted)", e.Got, e.Want, e.Timeout)
}

// Is makes the error match ErrNotReplicated.
func (e *NotReplicatedError) Is(target error) bool { return target == ErrNotReplicated }

// ErrNoReplicas matches (errors.Is) the error of a write the server refused
// with NOREPLICAS: fewer replicas than its min-replicas-to-write are
// connected with a lag within min-replicas-max-lag. The write was not
// applied (see NoReplicasError), so sending it again once the replicas are
// back is safe; the cause is a *NoReplicasError.
var ErrNoReplicas = errors.New("write refused: not enough good replicas")

// NoReplicasError is a write the server refused with NOREPLICAS; Err is
// the server's answer. Such a write was not applied: Redis refuses a
// script's write command for want of replicas only while the script has
// written nothing (once it has, it lets the script finish rather than
// leave half a write), and the store's scripts end at the first refused
// command, so a refused script changed nothing.
type NoReplicasError struct{ Err error }

func (e *NoReplicasError) Error() string {
	return "refused by the server, not applied: fewer replicas than its min-replicas-to-write are connected and within min-replicas-max-lag (" + e.Err.Error() + ")"
}

// Is makes the error match ErrNoReplicas.
func (e *NoReplicasError) Is(target error) bool { return target == ErrNoReplicas }

// Unwrap returns the server's answer.
func (e *NoReplicasError) Unwrap() error { return e.Err }

// WithTLSConfig is Dial's TLS configuration for a rediss:// URL, in place
// of go-redis's (the system's certificate authorities, no client
// certificate): the authority that signed the server's certificate
// (RootCAs) and a client certificate for a server that requires one
// (tls-auth-clients yes). Dial fills in ServerName from the URL's host when
// cfg leaves it empty; cfg is not modified. Dial refuses it with a
// redis:// URL (plain text), and New refuses it: a client made elsewhere
// carries its own Options.TLSConfig.
func WithTLSConfig(cfg *tls.Config) Option {
	return func(o *options) { o.tlsConfig = cfg }
}

func optionError(option string, value any, fix string) error {
	return &driver.OptionError{Backend: backend, Option: option, Value: value, Fix: fix}
}

// New returns a Store over c, which the caller keeps and closes. It sends
// nothing (Dial does confirm the server answers). The client must have
// ContextTimeoutEnabled set, so that every call ends with its context (as
// kvbreaker.Breaker bounds each with Settings.CallTimeout). Invalid options are
// *driver.OptionError, all of them joined.
func New(c goredis.UniversalClient, opts ...Option) (*Store, error) {
	o := resolve(opts)
	var errs []error
	if o.tlsConfig != nil {
		errs = append(errs, optionError("WithTLSConfig", "given to New", "set TLSConfig in the client's options (New does not make the client), or call Dial"))
	}
	return newStore(c, o, errs)
}

func resolve(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// newStore is New after its options are resolved; errs are problems found
// already.
func newStore(c goredis.UniversalClient, o options, errs []error) (*Store, error) {
	if c == nil {
		errs = append(errs, optionError("client", "nil", "pass a redis.UniversalClient (*redis.Client, *redis.ClusterClient, …), or call Dial"))
	}
	if o.replicaLagSet && o.replicaLag <= 0 {
		errs = append(errs, optionError("WithReplicaReads", o.replicaLag, "give the replicas' largest lag, a positive duration"))
	}
	if cc, ok := c.(*goredis.ClusterClient); ok && !o.replicaLagSet {
		if co := cc.Options(); co.ReadOnly || co.RouteByLatency || co.RouteRandomly {
			errs = append(errs, optionError("client", "a ClusterClient reading from replicas (ReadOnly, RouteByLatency or RouteRandomly)",
				"declare the replicas' lag with WithReplicaReads, or read from the masters"))
		}
	}
	if o.waitSet && (o.waitReplicas < 1 || o.waitTimeout <= 0) {
		errs = append(errs, optionError("WithWaitReplicas", fmt.Sprintf("%d replicas within %v", o.waitReplicas, o.waitTimeout),
			"give at least 1 replica and a positive timeout"))
	}
	if _, ok := c.(*goredis.Ring); ok && o.waitSet {
		errs = append(errs, optionError("WithWaitReplicas", "a Ring client", "use a Client, a failover client or a ClusterClient"))
	}
	if c != nil && !contextTimeouts(c) {
		errs = append(errs, optionError("client", "ContextTimeoutEnabled false",
			"set ContextTimeoutEnabled: true in the client's options, so that a call ends with its context (Dial does)"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Store{c: c, staleness: o.replicaLag, waitReplicas: o.waitReplicas, waitTimeout: o.waitTimeout}, nil
}

// contextTimeouts reports whether c ends a call when its context does:
// without ContextTimeoutEnabled go-redis bounds socket reads by
// ReadTimeout only (3 s, then retries), past Settings.CallTimeout. A client
// of another type is taken as it is.
func contextTimeouts(c goredis.UniversalClient) bool {
	switch c := c.(type) {
	case *goredis.Client:
		return c.Options().ContextTimeoutEnabled
	case *goredis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *goredis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true
}

// Client returns the client the store uses.
func (s *Store) Client() goredis.UniversalClient { return s.c }

// String names the Store's deployment without credentials: "redis at
// host:port db N", "redis cluster via host:port, host2:port" (the seeds),
// "redis via Sentinel db N" (a failover client, whose options keep no
// address), "redis ring of host:port, …".
func (s *Store) String() string { return deployment(s.c) }

// deployment is Store.String's name of client c, which Dial's and
// DialCluster's errors carry too.
func deployment(c goredis.UniversalClient) string {
	switch c := c.(type) {
	case *goredis.Client:
		o := c.Options()
		if o.Addr == "FailoverClient" { // go-redis's placeholder in a failover client's options
			return "redis via Sentinel db " + strconv.Itoa(o.DB)
		}
		return "redis at " + o.Addr + " db " + strconv.Itoa(o.DB)
	case *goredis.ClusterClient:
		return "redis cluster via " + strings.Join(c.Options().Addrs, ", ")
	case *goredis.Ring:
		return "redis ring of " + strings.Join(slices.Sorted(maps.Values(c.Options().Addrs)), ", ")
	}
	return backend
}

// Close releases the Store; later calls fail with ErrClosed. It ends every
// running Follow and waits until each has closed its connections (so fn
// must not call Close), and closes the client only when Dial made it.
// Records stay in Redis until their TTL.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.stopFollows()
	if !s.owns {
		return nil
	}
	return s.c.Close()
}

// Late is how long after its TTL a key may still be read: Redis judges a
// key expired once the server's millisecond clock is past its expiry
// instant, so a key lives through the millisecond its TTL ends in.
const Late = time.Millisecond

// Traits declares atomic compares; relative expiry on the server's clock in
// milliseconds, never early, late by at most Late; linearizable reads on
// the primary, or the lag declared with WithReplicaReads.
func (s *Store) Traits() driver.Traits {
	t := DefaultTraits()
	t.ReadStaleness = s.staleness
	return t
}

// DefaultTraits is what a Store declares with default options.
func DefaultTraits() driver.Traits {
	return adapter.ServerExpiry{Granularity: time.Millisecond, Late: Late}.Traits()
}

// Get implements driver.Store: one HMGET of the record's value and version.
// A key that is no record (see "Foreign data" in the package doc) costs a
// second round trip, a script that reads it whole.
func (s *Store) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	if s.closed.Load() {
		return nil, 0, opError(adapter.OpGet, key, ErrClosed)
	}
	vals, err := s.c.HMGet(ctx, key, FieldValue, FieldVersion).Result()
	switch {
	case goredis.HasErrorPrefix(err, "WRONGTYPE"):
		return s.getForeign(ctx, key)
	case err != nil:
		return nil, 0, opError(adapter.OpGet, key, err)
	}
	v, ok := vals[0].(string)
	if !ok {
		return nil, driver.NoVersion, driver.ErrNotFound // absent, or a tombstone
	}
	n, _ := vals[1].(string)
	ver, ok := recordVersion(n)
	if !ok {
		return s.getForeign(ctx, key)
	}
	return []byte(v), ver, nil
}

// getForeign reads a key HMGET found no record at with getScript, which
// judges it as the write scripts do.
func (s *Store) getForeign(ctx context.Context, key string) ([]byte, driver.Version, error) {
	res, err := getScript.Run(ctx, s.c, []string{key}).Slice()
	if err != nil {
		return nil, 0, opError(adapter.OpGet, key, err)
	}
	if len(res) != 3 {
		return nil, driver.NoVersion, driver.ErrNotFound
	}
	v, ok := res[1].(string)
	if !ok {
		return nil, 0, opError(adapter.OpGet, key, fmt.Errorf("unexpected script answer %v", res))
	}
	ver, err := parseVersion(res[2])
	if err != nil {
		return nil, 0, opError(adapter.OpGet, key, err)
	}
	return []byte(v), ver, nil
}

// lookLua defines look(key), which every script judges a key by. It
// returns the key's kind, value, version and writer:
//   - 'absent': no key, or a hash without v (a tombstone, or fields of
//     someone else's); the version is n if n is a record's version (a
//     tombstone's, which the next write continues from), else false;
//   - 'record': a hash with v and a record's version n (other fields are
//     ignored, and dropped by the next write);
//   - 'foreign': anything else: its value is the string's bytes, the hash's
//     v, or empty; its version is 'x8' and 15 hex digits of the SHA-1 of
//     its type and content (sorted where the type has no order), a number
//     of at least 2^63 that no record's version reaches, and that changes
//     when the content does.
//
// A record's version is the canonical decimal of an integer in [1, 2^53):
// what a script's arithmetic (doubles) adds one to exactly, and what
// compares equal as a string to the version a caller passes.
const lookLua = `
local function isver(n)
  return type(n) == 'string' and #n <= 16 and string.match(n, '^[1-9][0-9]*$') ~= nil and tonumber(n) < 9007199254740992
end
local function foreign(key, t)
  local parts, value = {t}, ''
  local function add(s) parts[#parts + 1] = #s .. ':' .. s end
  if t == 'string' then
    value = redis.call('GET', key)
    add(value)
  elseif t == 'hash' then
    local kv, fields, m = redis.call('HGETALL', key), {}, {}
    for i = 1, #kv, 2 do fields[#fields + 1] = kv[i]; m[kv[i]] = kv[i + 1] end
    table.sort(fields)
    for _, f in ipairs(fields) do add(f); add(m[f]) end
    if m['v'] then value = m['v'] end
  elseif t == 'list' then
    for _, e in ipairs(redis.call('LRANGE', key, 0, -1)) do add(e) end
  elseif t == 'set' then
    local m = redis.call('SMEMBERS', key)
    table.sort(m)
    for _, e in ipairs(m) do add(e) end
  elseif t == 'zset' then
    for _, e in ipairs(redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')) do add(e) end
  elseif t == 'stream' then
    for _, e in ipairs(redis.call('XRANGE', key, '-', '+')) do
      add(e[1])
      for _, f in ipairs(e[2]) do add(f) end
    end
  else
    add(redis.call('DUMP', key))
  end
  return 'foreign', value, 'x8' .. string.sub(redis.sha1hex(table.concat(parts, '\n')), 1, 15), false
end
local function look(key)
  local t = redis.call('TYPE', key)['ok']
  if t == 'none' then return 'absent', false, false, false end
  if t == 'hash' then
    local cur = redis.call('HMGET', key, 'v', 'n', 'w')
    if not cur[1] then
      local n = cur[2]
      if not isver(n) then n = false end
      return 'absent', false, n, cur[3]
    end
    if isver(cur[2]) then return 'record', cur[1], cur[2], cur[3] end
  end
  return foreign(key, t)
end
`

// getScript: KEYS[1] the key. It returns {0} when the key is absent (or a
// tombstone), else {1, value, version}.
var getScript = goredis.NewScript(lookLua + `
local kind, v, n = look(KEYS[1])
if kind == 'absent' then return {0} end
return {1, v, n}
`)

// casScript: KEYS[1] the key; ARGV old version in decimal ("0": only if
// absent), value, TTL in ms, write id, old version as a foreign one
// ("x" and hex; "" when it is none). It returns {1, version} when the write
// is applied (or was applied by this write's earlier run), {0, value,
// version} on a conflict, {0} when the key is absent and old was not "0".
// The write replaces whatever the key holds (DEL first: a foreign type, or
// fields of someone else's) and its TTL.
var casScript = goredis.NewScript(lookLua + `
local kind, cv, cn, cw = look(KEYS[1])
if kind == 'record' and cw == ARGV[4] then
  return {1, cn}
end
if kind == 'absent' then
  if ARGV[1] ~= '0' then return {0} end
elseif kind == 'record' then
  if cn ~= ARGV[1] then return {0, cv, cn} end
elseif cn ~= ARGV[5] then
  return {0, cv, cn}
end
local t = redis.call('TIME')
local ver = tonumber(t[1]) * 1000000 + tonumber(t[2])
if cn and kind ~= 'foreign' then
  local nx = tonumber(cn) + 1
  if nx > ver then ver = nx end
end
local vs = string.format('%.0f', ver)
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'n', vs, 'w', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, vs}
`)

// cadScript: KEYS[1] the key; ARGV old version in decimal, write id, old
// version as a foreign one ("x" and hex, or ""), the TTL in ms of a
// tombstone at a key that had none. It returns {1} when the delete is
// applied (or was by this delete's earlier run), {2} when the key is
// absent, {0, value, version} on a conflict. The delete leaves a tombstone
// that keeps the version and the remaining TTL (a foreign key's tombstone
// has no version); a key without TTL gets ARGV[4].
var cadScript = goredis.NewScript(lookLua + `
local kind, cv, cn, cw = look(KEYS[1])
if kind == 'absent' then
  if cw == ARGV[2] then return {1} end
  return {2}
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then ttl = ARGV[4] end
if kind == 'record' then
  if cn ~= ARGV[1] then return {0, cv, cn} end
  redis.call('HDEL', KEYS[1], 'v')
  redis.call('HSET', KEYS[1], 'w', ARGV[2])
else
  if cn ~= ARGV[3] then return {0, cv, cn} end
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'w', ARGV[2])
end
redis.call('PEXPIRE', KEYS[1], ttl)
return {1}
`)

// TombstoneTTL is the TTL of the tombstone CompareAndDelete leaves at a key
// that had none (written by something else): long enough for a resent
// delete to recognise it.
const TombstoneTTL = time.Minute

// CompareAndSwap implements driver.Store with one script run: it writes
// value with a TTL of ttl in milliseconds, rounded up, if key's version is
// old (driver.NoVersion: if key is absent or a tombstone), and otherwise
// returns a *driver.ConflictError with the current value and version.
func (s *Store) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	const op = adapter.OpSwap
	if err := s.gate().Swap(key, ttl); err != nil {
		return 0, err
	}
	res, err := s.write(ctx, casScript, key,
		strconv.FormatUint(uint64(old), 10), value, ceilMillis(ttl), writeID(), foreignArg(old))
	if err != nil {
		return 0, opError(op, key, err)
	}
	if ok, _ := res[0].(int64); ok == 1 && len(res) == 2 {
		ver, err := parseVersion(res[1])
		if err != nil {
			return 0, opError(op, key, err)
		}
		return ver, nil
	}
	return 0, conflict(op, key, res)
}

// CompareAndDelete implements driver.Store with one script run: it deletes
// key if its version is old, returns driver.ErrNotFound when key is absent
// and a *driver.ConflictError with the current value and version when
// another version is there.
func (s *Store) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	return s.compareAndDelete(ctx, key, old, writeID())
}

// compareAndDelete is CompareAndDelete as the write id's run: a rerun
// passes the same id.
func (s *Store) compareAndDelete(ctx context.Context, key string, old driver.Version, id string) error {
	const op = adapter.OpDelete
	if s.closed.Load() {
		return opError(op, key, ErrClosed)
	}
	res, err := s.write(ctx, cadScript, key, strconv.FormatUint(uint64(old), 10), id,
		foreignArg(old), ceilMillis(TombstoneTTL))
	if err != nil {
		return opError(op, key, err)
	}
	switch code, _ := res[0].(int64); code {
	case 1:
		return nil
	case 2:
		return driver.ErrNotFound
	}
	return conflict(op, key, res)
}

// write runs a write script on key, and with WithWaitReplicas a WAIT right
// after it on the same connection: one pipeline, so WAIT counts the
// replicas that acknowledged this write. WAIT cannot run inside a script,
// and a ClusterClient would send a keyless WAIT to any node, so on a
// Cluster the pipeline goes to the key's master's own client. A write
// whose script failed (a conflict is an answer, not a failure) is not
// waited for. A NOREPLICAS refusal is a *NoReplicasError.
func (s *Store) write(ctx context.Context, script *goredis.Script, key string, args ...any) ([]any, error) {
	res, err := s.writeWaiting(ctx, script, key, args...)
	if goredis.HasErrorPrefix(err, "NOREPLICAS") {
		return nil, &NoReplicasError{Err: err}
	}
	return res, err
}

func (s *Store) writeWaiting(ctx context.Context, script *goredis.Script, key string, args ...any) ([]any, error) {
	if s.waitReplicas == 0 {
		return script.Run(ctx, s.c, []string{key}, args...).Slice()
	}
	var c goredis.Cmdable = s.c
	if cc, ok := s.c.(*goredis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		c = m
	}
	run := func(eval bool) (*goredis.Cmd, *goredis.IntCmd, error) {
		pipe := c.Pipeline()
		var r *goredis.Cmd
		if eval {
			r = script.Eval(ctx, pipe, []string{key}, args...)
		} else {
			r = script.EvalSha(ctx, pipe, []string{key}, args...)
		}
		w := goredis.NewIntCmd(ctx, "wait", s.waitReplicas, ceilMillis(s.waitTimeout))
		_ = pipe.Process(ctx, w)
		_, err := pipe.Exec(ctx)
		return r, w, err
	}
	r, w, _ := run(false)
	if goredis.HasErrorPrefix(r.Err(), "NOSCRIPT") {
		r, w, _ = run(true)
	}
	res, err := r.Slice()
	if err != nil {
		if cc, ok := s.c.(*goredis.ClusterClient); ok && (goredis.HasErrorPrefix(err, "MOVED") || goredis.HasErrorPrefix(err, "ASK")) {
			// The slot moved (a failover): the next write asks the new
			// master.
			cc.ReloadState(ctx)
		}
		return nil, err
	}
	got, err := w.Result()
	if err != nil {
		return nil, fmt.Errorf("applied on the primary, then WAIT failed: %w", err)
	}
	if ok, _ := res[0].(int64); ok == 1 && int(got) < s.waitReplicas {
		return nil, &NotReplicatedError{Got: int(got), Want: s.waitReplicas, Timeout: s.waitTimeout}
	}
	return res, nil
}

// conflict turns a script's {0[, value, version]} into a *driver.ConflictError.
func conflict(op, key string, res []any) error {
	ce := &driver.ConflictError{}
	if len(res) == 3 {
		v, ok := res[1].(string)
		if !ok {
			return opError(op, key, fmt.Errorf("unexpected script answer %v", res))
		}
		ver, err := parseVersion(res[2])
		if err != nil {
			return opError(op, key, err)
		}
		ce.Value, ce.Version = []byte(v), ver
	}
	return ce
}

// foreignBase is the least version of foreign data: every version of
// a key no record is at has this bit set, which no record's reaches.
const foreignBase = 1 << 63

// maxRecordVersion bounds a record's version: the scripts' doubles count
// exactly below it.
const maxRecordVersion = 1 << 53

// recordVersion reads a record's version field: the canonical decimal of
// an integer in [1, 2^53), as the scripts' isver accepts.
func recordVersion(n string) (driver.Version, bool) {
	if len(n) == 0 || len(n) > 16 || n[0] == '0' {
		return 0, false
	}
	v, err := strconv.ParseUint(n, 10, 64)
	if err != nil || v >= maxRecordVersion {
		return 0, false
	}
	return driver.Version(v), true
}

// parseVersion reads a version a script returns: a record's, or a foreign
// key's ("x" and hex).
func parseVersion(v any) (driver.Version, error) {
	str, _ := v.(string)
	if hex, ok := strings.CutPrefix(str, "x"); ok {
		if n, err := strconv.ParseUint(hex, 16, 64); err == nil && n >= foreignBase {
			return driver.Version(n), nil
		}
	} else if ver, ok := recordVersion(str); ok {
		return ver, nil
	}
	return 0, fmt.Errorf("unexpected version %q in a script's answer", str)
}

// foreignArg is a version as the scripts name foreign data's: "x" and
// hex, or "" for a version no foreign data has.
func foreignArg(v driver.Version) string {
	if v < foreignBase {
		return ""
	}
	return "x" + strconv.FormatUint(uint64(v), 16)
}

// ceilMillis rounds d up to whole milliseconds, at least 1.
func ceilMillis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return max(1, ms)
}

// writeID is a random 128-bit id for one write, by which a rerun of the
// write's script recognises the record its earlier run made.
func writeID() string {
	var b [32]byte
	x := strconv.AppendUint(b[:0], rand.Uint64(), 36)
	x = append(x, '.')
	return string(strconv.AppendUint(x, rand.Uint64(), 36))
}

// opError is the shape of every error but ErrNotFound and conflicts. A
// call whose connection could not be made (nothing was sent) has an
// *driver.UnreachableError as its cause, as Dial's has, so that every call keeps
// driver's promise for a store that cannot be reached.
// gate is what Follow, List and CompareAndSwap check before they contact
// the server.
func (s *Store) gate() adapter.Gate {
	return adapter.Gate{Closed: s.closed.Load, ErrClosed: ErrClosed, Wrap: opError}
}

func opError(op, key string, err error) error {
	if dial, ok := adapter.DialFailed(err); ok {
		if _, already := errors.AsType[*driver.UnreachableError](err); !already {
			err = &driver.UnreachableError{Backend: backend, Endpoints: []string{dialedAt(dial)}, Reason: adapter.DialReason(dial), Err: err}
		}
	}
	return &driver.OpError{Backend: backend, Op: op, Key: key, Err: err}
}

// dialedAt names where a failed dial went.
func dialedAt(dial error) string {
	if op, ok := dial.(*net.OpError); ok && op.Addr != nil {
		return op.Addr.String()
	}
	if dns, ok := dial.(*net.DNSError); ok {
		return dns.Name
	}
	return "its address"
}

// expiryScript: KEYS[1] the key. It returns the key's PTTL (-1: no TTL), or
// -2 when Get reads it as absent (no key, or a tombstone).
var expiryScript = goredis.NewScript(lookLua + `
if look(KEYS[1]) == 'absent' then return -2 end
return redis.call('PTTL', KEYS[1])
`)

// Expiry implements driver.ExpiryReader with the key's PTTL: the time in
// milliseconds until Redis deletes it, driver.NoExpiry for a key without a
// TTL (which only something other than this adapter writes), and
// driver.ErrNotFound when Get reads the key as absent (no key, or a
// tombstone).
func (s *Store) Expiry(ctx context.Context, key string) (time.Duration, error) {
	const op = adapter.OpExpiry
	if s.closed.Load() {
		return 0, opError(op, key, ErrClosed)
	}
	ms, err := expiryScript.Run(ctx, s.c, []string{key}).Int64()
	switch {
	case err != nil:
		return 0, opError(op, key, err)
	case ms == -2:
		return 0, driver.ErrNotFound
	case ms == -1:
		return driver.NoExpiry, nil
	case ms < 0:
		return 0, opError(op, key, fmt.Errorf("unexpected PTTL %d", ms))
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// PurgeKey deletes key whatever it holds (a record, or the tombstone a
// Delete leaves for the record's remaining TTL) and returns how many keys
// it deleted, 0 or 1. It bypasses the compare-and-swap a Breaker relies on:
// it is for a tool that cleans up keys it wrote itself (kvbreaker check).
func (s *Store) PurgeKey(ctx context.Context, key string) (int64, error) {
	n, err := s.c.Del(ctx, key).Result()
	if err != nil {
		return 0, fmt.Errorf("redis: purge %q: %w", key, err)
	}
	return n, nil
}
