// Package dynamodb is a driver.Store over Amazon DynamoDB (aws-sdk-go-v2):
// one item per host, compare-and-swap as one conditional UpdateItem on a
// version attribute, and expiry judged by the reader's clock.
//
// # Items
//
// Each host is one item in a table whose partition key is the String
// attribute AttrKey ("pk"):
//
//	pk         S  the key, as the Breaker passes it (the host, or the
//	              prefix + host under kvbreaker.Prefixed)
//	rec        B  the encoded record (omitted when empty)
//	ver        N  the version: a random non-zero 64-bit number, new on every write
//	expiresAt  N  logical expiry, epoch seconds, ceil(writer's now + ttl); 0 for a tombstone
//	purgeAt    N  physical expiry for the table's TTL: expiresAt + PurgeDelay
//	h1 … h4    N  the versions the item had before ver, newest first (0: none)
//
// DynamoDB's TTL deletes expired items days late, so expiry is enforced by the
// readers: an item whose expiresAt is at or before the reader's clock reads as
// driver.ErrNotFound and counts as absent for a create. Writer/reader clock skew
// therefore cancels (DESIGN §2: margin ≥ early + granularity). The physical
// TTL runs on AWS's clock and must never come first, so it is a separate
// attribute padded by PurgeDelay (default one hour) rather than the logical
// expiry itself; the padding is the clock skew the store tolerates (Traits).
//
// A delete writes a tombstone instead of removing the item: expiresAt 0 (so
// it is absent to every reader and every create), no rec, a fresh version,
// and purgeAt = ceil(now) + PurgeDelay. Every write sets ver, expiresAt and
// purgeAt and sets or removes rec, so nothing of the previous write's value
// or expiry survives it.
//
// # Conditions
//
//	create (old == driver.NoVersion):  attribute_not_exists(pk) OR
//	                                 (expiresAt <= :now AND NOT (ver = :new OR h1 = :new … OR h4 = :new))
//	swap / delete (old == v):        ver = :v AND expiresAt > :now
//
// where :now is the reader's clock in whole epoch seconds, rounded down.
// Because expiresAt is a whole second, "now >= expiresAt" and
// "floor(now) >= expiresAt" are the same test, so Get and the conditions
// always agree on what has expired. A failed condition asks for the old item
// (ReturnValuesOnConditionCheckFailure=ALL_OLD) and returns it in a
// *driver.ConflictError; servers that do not return it (dynalite), and real
// DynamoDB when the item is absent, cost one consistent GetItem instead. If
// that read finds exactly the state the write expected (a create failed,
// then the key was deleted), no single instant explains both answers, so the
// error matches driver.ErrConflict without claiming a current value.
//
// # Foreign items
//
// A key under the Breaker's table (and prefix) is the Breaker's, so an item
// there that this adapter did not write in the shape above (ver missing,
// not a number, 0, negative or fractional; expiresAt missing or not a
// number; rec not binary; whatever other software, an older version or a
// hand edit left) must not disable the breaker. Get returns it as a value
// no record decodes (a 0 byte, then "dynamodb: malformed item: …" saying
// what is wrong), so a Breaker overwrites it, with a version that names
// exactly that item: the first 8 bytes of a SHA-256 of its raw ver,
// expiresAt and rec attributes (type and value, each or its absence), the
// same for every worker. A foreign item is live until its expiresAt if
// that is a number, and forever otherwise.
//
// CompareAndSwap and CompareAndDelete with that version first send their
// usual write, whose condition fails; the old item (ALL_OLD, or the re-read
// where the server sends none) shows the foreign item the version names,
// and the write is sent once more, conditioned on exactly what is there:
// the key exists, each of the three attributes is absent
// (attribute_not_exists) or equal to what was read (= on a scalar; on a
// list, map or set its attribute_type, size and each element by path, or
// each member by contains, since dynalite's "=" never holds for lists and
// maps; beyond 48 elements in all, containers are matched by type and size
// only), and a numeric expiresAt is still after now. A changed item fails
// that condition and is a conflict naming what is there now. The write
// sets ver, expiresAt and purgeAt and sets or removes rec, as every write
// does, so the item gets the write's TTL and DynamoDB's TTL deletes it in
// time even if it had no purgeAt. The lost-answer recognition below covers
// this write as any other (its version is in ver after it). Cost: two more
// requests (a read where the server returns no old item), once per
// foreign item.
//
// # Ambiguous outcomes
//
// The SDK retries a write whose first attempt was applied but answered with
// a 5xx or not at all (a dropped connection). The retry's condition then
// fails because of the call's own write. Every write carries a version of its
// own (random, so two writers starting from one version never share it), and
// a failed condition whose item has that version as ver or in h1…h4 is this
// call's write: CompareAndSwap returns its version and CompareAndDelete nil,
// as if the first answer had arrived. The create condition refuses an item
// that already holds the call's version, so a retried create is never
// applied twice. This costs nothing in the common case (one UpdateItem per
// call) and the same as any conflict otherwise. Five versions of evidence
// tolerate four writes by others between the lost answer and the retry; past
// that the call reports a conflict, as before.
//
// # Errors
//
// Errors other than driver.ErrNotFound and conflicts are *driver.OpError
// ("dynamodb: get <key>: <cause>") and keep the SDK's error types for
// errors.As: throttling (*types.ProvisionedThroughputExceededException,
// ThrottlingException) is retried by the client's retryer, bounded by the
// context, and surfaces with its type when retries run out. A conflict is a
// *driver.ConflictError, not wrapped, that also matches
// *types.ConditionalCheckFailedException.
//
// # Unreachable endpoints
//
// A refused connection or a name that does not resolve means nothing was
// sent: the store tells the client's retryer not to retry it (the standard
// retryer would add two backoffs, up to 3 s, to an answer already known)
// and returns an *driver.UnreachableError, "cannot reach dynamodb at <endpoint>:
// connection refused", matching driver.ErrUnreachable. An endpoint that accepts
// the connection and never answers is bounded by the caller's context; the
// error then says "no answer from dynamodb at <endpoint> before the context
// ended" and matches the context's error.
//
// # Listing
//
// Store implements driver.Lister (for `kvbreaker list`) with a paginated
// Scan: the table's only key is the partition key, which Query cannot match
// by prefix. It implements driver.ExpiryReader (for `kvbreaker inspect`
// and `list`): the time until expiresAt, or driver.NoExpiry for a foreign
// item with no numeric expiresAt or purgeAt, which only a write replaces. It reads DynamoDB's clock (driver.ClockSampler) from the HTTP
// Date header of a GetItem, to the second: see SampleClock.
package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// Attribute names of a host's item. Create tables outside CreateTable with
// AttrKey as the String partition key (and no sort key), and enable TTL on
// AttrPurgeAt.
const (
	AttrKey       = "pk"
	AttrRecord    = "rec"
	AttrVersion   = "ver"
	AttrExpiresAt = "expiresAt"
	AttrPurgeAt   = "purgeAt"
	// AttrHistory + "1" … AttrHistory + "4" hold the versions the item had
	// before the current one, newest first.
	AttrHistory = "h"
)

// historyDepth is how many replaced versions an item keeps. A write whose
// answer was lost is recognised when its SDK retry finds its version among
// the current one and these, so it tolerates this many writes by other
// workers between the lost answer and the retry (the SDK's standard
// retryer waits a random part of 2 s, then of 4 s). Four cost about 50 bytes per item, well
// inside the 1 KB that one write unit pays for.
const historyDepth = 4

func attrHistory(i int) string { return AttrHistory + strconv.Itoa(i) }

// DefaultPurgeDelay is how long after its logical expiry an item becomes
// eligible for DynamoDB's TTL deletion.
const DefaultPurgeDelay = time.Hour

// Store is a driver.Store over one DynamoDB table. It is safe for concurrent
// use. The zero value is not usable; call New.
type Store struct {
	client   *dyn.Client
	table    string
	clock    func() time.Time
	purge    int64  // seconds
	endpoint string // for errors, when the SDK's error does not name the URL
	// failFast is a per-call client option: the client's retryer, told not
	// to retry a connection that was refused (see "Unreachable endpoints").
	failFast func(*dyn.Options)
	closed   atomic.Bool
}

// ErrClosed is the cause of a Store method's *driver.OpError after Close.
var ErrClosed = errors.New("store closed")

// Close ends the Store: later calls fail with ErrClosed, sending nothing;
// requests in flight finish. The client stays the caller's: the Store
// holds no connection of its own, nothing runs in its background, and
// Close returns nil.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}

// options is what the Options set; New checks it.
type options struct {
	clock func() time.Time
	purge time.Duration
}

// Option configures a Store.
type Option func(*options)

// WithClock makes the store judge expiry, and compute expiry instants, by
// clock instead of time.Now.
func WithClock(clock func() time.Time) Option { return func(o *options) { o.clock = clock } }

// WithPurgeDelay sets how long after the logical expiry the physical TTL
// attribute lets DynamoDB delete an item, rounded up to whole seconds
// (default DefaultPurgeDelay). It must be positive, and it bounds the clock
// skew the store tolerates: Traits().MaxClockSkew is the rounded delay, and
// kvbreaker.New refuses a larger Settings.ClockSkew (see Traits).
func WithPurgeDelay(d time.Duration) Option { return func(o *options) { o.purge = d } }

// New returns a Store over table, using client as configured by the caller
// (credentials, region, endpoint, retryer). The table must exist with
// AttrKey as its String partition key; see CreateTable. Every invalid
// argument or option is reported, joined, as a *driver.OptionError. To keep
// several fleets apart in one table, wrap the store with kvbreaker.Prefixed.
func New(client *dyn.Client, table string, opts ...Option) (*Store, error) {
	o := options{clock: time.Now, purge: DefaultPurgeDelay}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	problems := adapter.Problems{Backend: "dynamodb"}
	bad := problems.Add
	if client == nil {
		bad("client", "nil", "pass a *dynamodb.Client (dynamodb.NewFromConfig)")
	}
	if !validTableName(table) {
		bad("table name", strconv.Quote(table), "name a table of 3 to 255 letters, digits, '_', '-' or '.' (see CreateTable)")
	}
	problems.Clock(o.clock)
	if o.purge <= 0 {
		bad("WithPurgeDelay", o.purge, fmt.Sprintf("set at least the fleet's clock skew (Settings.ClockSkew), or leave it out for %v", DefaultPurgeDelay))
	}
	if err := problems.Err(); err != nil {
		return nil, err
	}
	s := &Store{client: client, table: table, clock: o.clock, purge: int64(math.Ceil(o.purge.Seconds()))}
	copts := client.Options()
	s.endpoint = aws.ToString(copts.BaseEndpoint)
	if s.endpoint == "" {
		s.endpoint = "dynamodb." + copts.Region + ".amazonaws.com"
	}
	retryer := failFastRetryer{copts.Retryer}
	s.failFast = func(o *dyn.Options) {
		if o.Retryer != nil {
			o.Retryer = retryer
		}
	}
	return s, nil
}

// validTableName reports whether name is a valid DynamoDB table name.
func validTableName(name string) bool {
	if len(name) < 3 || len(name) > 255 {
		return false
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// Traits: atomic conditional writes; absolute expiry filtered by the
// reader's clock; linearizable reads (ConsistentRead, and conditions are
// evaluated on the item's latest version).
//
// Expiry model. A write at writer time w with ttl stores
// expiresAt = ceil(w + ttl) in whole epoch seconds, and a reader at time r
// treats the item as absent once r >= expiresAt. On one clock the entry is
// therefore live for [ttl, ttl + 1 s): never early (Early 0), up to 1 s late
// (Late 1 s), quantised to Granularity 1 s. Across clocks, expiresAt is in
// the writer's time, as are the record's own instants (failures,
// RestrainedUntil) it protects, and every reader judges both on its own
// clock, so writer/reader skew cancels (driver.ExpiryReaderFiltered: the
// required margin is Early + Granularity = 1 s, with no skew term). The only
// server clock involved is the physical TTL's, on AttrPurgeAt, which runs
// PurgeDelay (default 1 h) behind the logical expiry and, in DynamoDB,
// typically days later still; no read sees that lag, so it is not part of
// Late.
//
// Clock skew. A reader whose clock is δ behind true time counts an item as
// live until true time expiresAt + δ, so the physical copy must last that
// long. DynamoDB's TTL never deletes an item before its purgeAt (it may be
// days later, but nothing promises that), and purgeAt = expiresAt + P where
// P is the purge delay in whole seconds, both integers, so nothing is lost
// to rounding: the item is there until true time expiresAt + P at least,
// which covers δ ≤ P exactly. MaxClockSkew is therefore P (AWS's TTL clock
// taken as true time), and kvbreaker.New refuses a larger
// Settings.ClockSkew, naming WithPurgeDelay.
func (s *Store) Traits() driver.Traits { return traits(time.Duration(s.purge) * time.Second) }

// item is a decoded host item.
type item struct {
	value     []byte
	version   driver.Version
	expiresAt int64 // epoch seconds
	history   [historyDepth]driver.Version
	// own is a foreign item's ver attribute, when it is a number that
	// could be a version of ours (a write of ours someone changed since).
	own driver.Version
	// foreign is set for an item not in this adapter's shape; version is
	// then a digest of its raw attributes (see foreignItem).
	foreign *foreign
}

// wrote reports whether the item is, or replaced, the write of version v.
func (it item) wrote(v driver.Version) bool {
	if v == driver.NoVersion {
		return false
	}
	if it.version == v || it.own == v {
		return true
	}
	for _, h := range it.history {
		if h == v {
			return true
		}
	}
	return false
}

// expired reports whether it has expired by now: now >= expiresAt, which for
// a whole-second expiresAt is floor(now) >= expiresAt.
func (it item) expired(now time.Time) bool { return now.Unix() >= it.expiresAt }

// gate is what List and CompareAndSwap check before they send a request.
func (s *Store) gate() adapter.Gate {
	return adapter.Gate{Closed: s.closed.Load, ErrClosed: ErrClosed, Wrap: s.wrap}
}

func (s *Store) wrap(op, key string, err error) error {
	return &driver.OpError{Backend: "dynamodb", Op: op, Key: key, Err: s.cause(err)}
}

func keyAttr(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrKey: &types.AttributeValueMemberS{Value: key}}
}

// Get implements driver.Store with a consistent GetItem. An absent item, or
// one whose expiresAt has passed by the store's clock, returns
// driver.ErrNotFound; an item not in the adapter's shape is an undecodable
// value with a version naming it (see "Foreign items" in the package doc),
// which the next write replaces.
func (s *Store) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	if s.closed.Load() {
		return nil, driver.NoVersion, s.wrap(adapter.OpGet, key, ErrClosed)
	}
	it, found, err := s.read(ctx, key)
	if err != nil {
		return nil, driver.NoVersion, s.wrap(adapter.OpGet, key, err)
	}
	if !found {
		return nil, driver.NoVersion, driver.ErrNotFound
	}
	return it.value, it.version, nil
}

// Expiry implements driver.ExpiryReader with a consistent GetItem: the time
// from the store's clock until Get stops returning key, which is its
// expiresAt (or, for a foreign item without a numeric expiresAt, DynamoDB's
// TTL deletion at a numeric purgeAt: 0 once that has passed, as TTL
// deletes days late); driver.NoExpiry for an item with neither, which
// only a write replaces. An absent, expired or deleted key is
// driver.ErrNotFound.
func (s *Store) Expiry(ctx context.Context, key string) (time.Duration, error) {
	if s.closed.Load() {
		return 0, s.wrap(adapter.OpExpiry, key, ErrClosed)
	}
	it, attrs, err := s.readItem(ctx, key)
	if err != nil {
		return 0, s.wrap(adapter.OpExpiry, key, err)
	}
	now := s.clock()
	if attrs == nil || it.expired(now) {
		return 0, driver.ErrNotFound
	}
	return expiryOf(it, attrs, now), nil
}

var _ driver.ExpiryReader = (*Store)(nil)

// read returns key's live item; found is false when it is absent, expired
// or a tombstone.
func (s *Store) read(ctx context.Context, key string) (it item, found bool, err error) {
	it, attrs, err := s.readItem(ctx, key)
	if err != nil || attrs == nil || it.expired(s.clock()) {
		return item{}, false, err
	}
	return it, true, nil
}

// readItem returns the item physically stored under key, expired or not,
// and its attributes as stored: nil when there is none.
func (s *Store) readItem(ctx context.Context, key string) (it item, attrs map[string]types.AttributeValue, err error) {
	out, err := s.client.GetItem(ctx, &dyn.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            keyAttr(key),
		ConsistentRead: aws.Bool(true),
	}, s.failFast)
	if err != nil {
		return item{}, nil, err
	}
	if len(out.Item) == 0 {
		return item{}, nil, nil
	}
	return decodeItem(out.Item), out.Item, nil
}

// CompareAndSwap implements driver.Store with one conditional UpdateItem and
// returns the new (random) version. A failed condition returns an error
// matching driver.ErrConflict and *types.ConditionalCheckFailedException; it is
// a *driver.ConflictError holding the current value and version (NoVersion when
// absent or expired) except in the rare race described on conflict, when no
// current value is claimed. A failed condition caused by this call's own
// earlier attempt (an SDK retry of an applied write) is a success: see
// "Ambiguous outcomes" in the package doc. ttl must be positive.
func (s *Store) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	if err := s.gate().Swap(key, ttl); err != nil {
		return driver.NoVersion, err
	}
	now := s.clock()
	exp := ceilUnix(now.Add(ttl))
	ver := newVersion(old)
	write := func(f *foreign) error {
		return s.write(ctx, adapter.OpSwap, key, old, ver, now, s.update(key, old, ver, now, exp, exp+s.purge, value, f))
	}
	if err := s.replacing(write); err != nil {
		return driver.NoVersion, err
	}
	return ver, nil
}

// replacing runs write, which makes one conditional write and turns its
// failure into the contract's error (see write). When the failure shows a
// foreign item that the caller's version names (the version Get returned
// for it), write runs once more with a condition on that item's raw
// attributes, so that it replaces exactly that item.
func (s *Store) replacing(write func(*foreign) error) error {
	err := write(nil)
	if f, ok := err.(*foreignMatch); ok {
		err = write(f.f)
		if _, again := err.(*foreignMatch); again {
			// The condition on the raw attributes failed, and the item
			// read after it has them again: it changed and changed back.
			err = fmt.Errorf("%w (the foreign item changed while it was replaced)", driver.ErrConflict)
		}
	}
	return err
}

// foreignMatch is write's answer when the key holds the foreign item the
// caller's version names: replacing writes again with f's condition. It
// never leaves the package.
type foreignMatch struct{ f *foreign }

func (*foreignMatch) Error() string {
	return "dynamodb: the key holds the foreign item the version names"
}

// write sends one conditional UpdateItem and returns the contract's error
// for its outcome: nil when applied, conflict's answer for a failed
// condition.
func (s *Store) write(ctx context.Context, op, key string, old, ver driver.Version, now time.Time, in *dyn.UpdateItemInput) error {
	_, err := s.client.UpdateItem(ctx, in, s.failFast)
	if err == nil {
		return nil
	}
	if ccf, ok := errors.AsType[*types.ConditionalCheckFailedException](err); ok {
		return s.conflict(ctx, op, key, old, ver, err, ccf, now)
	}
	return s.wrap(op, key, err)
}

// CompareAndDelete implements driver.Store with one conditional UpdateItem
// that replaces the item by a tombstone: an item expired at epoch 0 (so every
// reader and every create condition counts it as absent) carrying a fresh
// version, by which a retry of this call recognises its own delete. It
// returns driver.ErrNotFound when the key is absent or expired and a conflict
// (as for CompareAndSwap) when another version is there. With
// old == driver.NoVersion there is nothing to delete: it only reads, returning
// driver.ErrNotFound or a *driver.ConflictError.
func (s *Store) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	if s.closed.Load() {
		return s.wrap(adapter.OpDelete, key, ErrClosed)
	}
	if old == driver.NoVersion {
		// Deleting "absent": nothing to delete, but say what is there.
		it, found, err := s.read(ctx, key)
		switch {
		case err != nil:
			return s.wrap(adapter.OpDelete, key, err)
		case !found:
			return driver.ErrNotFound
		}
		return &driver.ConflictError{Value: it.value, Version: it.version}
	}
	now := s.clock()
	ver := newVersion(old)
	// The tombstone stays physically for PurgeDelay, far longer than any
	// retry of this call.
	return s.replacing(func(f *foreign) error {
		return s.write(ctx, adapter.OpDelete, key, old, ver, now, s.update(key, old, ver, now, tombstoneExpiresAt, ceilUnix(now)+s.purge, nil, f))
	})
}

// tombstoneExpiresAt is the logical expiry of a deleted key's tombstone:
// every clock is past it, so it reads as absent everywhere, including to
// adapters that predate tombstones.
const tombstoneExpiresAt = 0

// update builds the conditional UpdateItem that writes version ver (with
// value, expiresAt and purgeAt) over a key expected at old, judged at now.
//
// UpdateItem rather than PutItem, so the item keeps the versions it had
// before (AttrHistory...): the write shifts them down and pushes the
// replaced version in. The actions are listed so that the result is the same
// whether DynamoDB evaluates every operand on the old item (as documented)
// or action by action left to right. Every attribute the item owes is set,
// and rec is removed when value is empty, so no write ever keeps a previous
// value or expiry.
//
// With f set, the condition is f's instead: the key still holds exactly
// that foreign item, live at now (the caller's old is its digest).
func (s *Store) update(key string, old, ver driver.Version, now time.Time, expiresAt, purgeAt int64, value []byte, f *foreign) *dyn.UpdateItemInput {
	names := map[string]string{"#ver": AttrVersion, "#exp": AttrExpiresAt, "#purge": AttrPurgeAt, "#rec": AttrRecord}
	values := map[string]types.AttributeValue{
		":new":   numberValue(uint64(ver)),
		":exp":   &types.AttributeValueMemberN{Value: strconv.FormatInt(expiresAt, 10)},
		":purge": &types.AttributeValueMemberN{Value: strconv.FormatInt(purgeAt, 10)},
		":zero":  numberValue(0),
		":now":   &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Unix(), 10)},
	}
	var set []string
	for i := historyDepth; i >= 1; i-- {
		from := "#ver"
		if i > 1 {
			from = "#h" + strconv.Itoa(i-1)
		}
		names["#h"+strconv.Itoa(i)] = attrHistory(i)
		set = append(set, fmt.Sprintf("#h%d = if_not_exists(%s, :zero)", i, from))
	}
	set = append(set, "#ver = :new", "#exp = :exp", "#purge = :purge")
	expr := ""
	if len(value) > 0 {
		values[":rec"] = &types.AttributeValueMemberB{Value: value}
		set = append(set, "#rec = :rec")
		expr = "SET " + strings.Join(set, ", ")
	} else {
		expr = "SET " + strings.Join(set, ", ") + " REMOVE #rec"
	}
	var cond string
	switch {
	case f != nil:
		cond = f.condition(names, values)
	case old == driver.NoVersion:
		// Absent or expired, and not already holding this very write (an
		// SDK retry of a create that was applied, then deleted or replaced
		// by another worker, must not apply it a second time).
		names["#pk"] = AttrKey
		mine := []string{"#ver = :new"}
		for i := 1; i <= historyDepth; i++ {
			mine = append(mine, fmt.Sprintf("#h%d = :new", i))
		}
		cond = "attribute_not_exists(#pk) OR (#exp <= :now AND NOT (" + strings.Join(mine, " OR ") + "))"
	default:
		values[":old"] = numberValue(uint64(old))
		cond = "#ver = :old AND #exp > :now"
	}
	if !strings.Contains(cond, ":now") {
		delete(values, ":now") // DynamoDB refuses unused values
	}
	return &dyn.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 keyAttr(key),
		UpdateExpression:                    aws.String(expr),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

func numberValue(n uint64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatUint(n, 10)}
}

// conflict turns a failed condition into the error the contract asks for: a
// *driver.ConflictError carrying the current item (from ALL_OLD, else from a
// consistent re-read), or driver.ErrNotFound for a delete of an absent key.
// err is the SDK's error, kept for errors.As.
//
// When the server sent no item and the re-read fails, the error does not
// match driver.ErrConflict: the write may have been applied (see "Ambiguous
// outcomes" in the package doc), so the caller must not retry it as a lost
// race.
//
// It returns a *foreignMatch when the key holds, live, the foreign item that
// old names: the caller writes again on that item's own condition.
//
// It returns nil when the item shows that this call's own write, version
// mine, was applied: its version is mine, or mine is in its history. That is
// an SDK retry whose first attempt was applied but answered with an error or
// not at all; the write succeeded (and may already have been replaced).
//
// A re-read happens after the failed write, so it may see a later state. That
// is still a state the key had while the call was in flight, so reporting it
// is linearizable — unless it is the very state the write expected (a create
// failed, then the key was deleted before the read): no single instant
// explains both, so that case returns a bare conflict (matching
// driver.ErrConflict, no current value) and the caller reads for itself.
func (s *Store) conflict(ctx context.Context, op, key string, old, mine driver.Version, err error, ccf *types.ConditionalCheckFailedException, now time.Time) error {
	var (
		cur   item
		found bool
	)
	if len(ccf.Item) > 0 {
		it := decodeItem(ccf.Item)
		if it.wrote(mine) {
			return nil
		}
		// Judge it with the same :now the condition used.
		cur, found = it, !it.expired(now)
		if found && it.foreign != nil && it.version == old {
			return &foreignMatch{it.foreign}
		}
	} else {
		// No old item: the server does not return it (dynalite), or the
		// key is absent (DynamoDB). A consistent read tells which.
		it, attrs, rerr := s.readItem(ctx, key)
		present := attrs != nil
		if rerr != nil {
			// Without the item nobody can tell whether this call's own
			// first attempt is what failed the condition, so the outcome
			// is unknown: not a conflict, or Breaker would recompute on
			// a record that may already hold this write and apply it twice.
			return s.wrap(op, key, fmt.Errorf("condition failed and the re-read to tell whose write is there failed: %w (condition: %v)", rerr, err))
		}
		if present && it.wrote(mine) {
			return nil
		}
		cur, found = it, present && !it.expired(s.clock())
		if found && it.foreign != nil && it.version == old {
			return &foreignMatch{it.foreign}
		}
		if (!found && old == driver.NoVersion) || (found && cur.version == old) {
			// Not a *driver.ConflictError: no current value is claimed.
			return fmt.Errorf("%w (the key changed again before the re-read): %w", driver.ErrConflict, err)
		}
	}
	if !found {
		if op == adapter.OpDelete {
			return driver.ErrNotFound
		}
		return &driver.ConflictError{Version: driver.NoVersion, Err: err}
	}
	return &driver.ConflictError{Value: cur.value, Version: cur.version, Err: err}
}

// decodeItem parses a host item. An item not in this adapter's shape (a
// missing, non-numeric, zero, negative or fractional ver; a missing or
// non-numeric expiresAt; a rec that is not binary) is a foreign item: see
// foreignItem.
func decodeItem(av map[string]types.AttributeValue) item {
	it, err := decodeOwn(av)
	if err != nil {
		return foreignItem(av, err.Error())
	}
	return it
}

// decodeOwn parses an item in this adapter's shape; anything else is an
// error saying what is wrong.
func decodeOwn(av map[string]types.AttributeValue) (item, error) {
	var it item
	ver, err := numberAttr(av, AttrVersion)
	if err != nil {
		return item{}, err
	}
	v, err := strconv.ParseUint(ver, 10, 64)
	if err != nil || v == 0 {
		return item{}, fmt.Errorf("malformed item: %s = %q is not a version", AttrVersion, ver)
	}
	it.version = driver.Version(v)
	exp, err := numberAttr(av, AttrExpiresAt)
	if err != nil {
		return item{}, err
	}
	if it.expiresAt, err = strconv.ParseInt(exp, 10, 64); err != nil {
		return item{}, fmt.Errorf("malformed item: %s = %q is not epoch seconds", AttrExpiresAt, exp)
	}
	it.history = decodeHistory(av)
	switch r := av[AttrRecord].(type) {
	case nil:
		it.value = []byte{}
	case *types.AttributeValueMemberB:
		it.value = r.Value
	default:
		return item{}, fmt.Errorf("malformed item: %s is %s, not binary", AttrRecord, typeName(r))
	}
	return it, nil
}

// decodeHistory reads h1…h4. History is evidence only: a missing or
// unreadable entry (an item written before it existed) proves nothing and
// is skipped.
func decodeHistory(av map[string]types.AttributeValue) (h [historyDepth]driver.Version) {
	for i := range h {
		if n, ok := av[attrHistory(i+1)].(*types.AttributeValueMemberN); ok {
			if v, err := strconv.ParseUint(n.Value, 10, 64); err == nil {
				h[i] = driver.Version(v)
			}
		}
	}
	return h
}

// typeName is the DynamoDB name of v's type ("S", "N", "L", …): the SDK
// names each member type after it (*types.AttributeValueMemberS, …), and
// any other type is named as Go prints it.
func typeName(v types.AttributeValue) string {
	return strings.TrimPrefix(fmt.Sprintf("%T", v), "*types.AttributeValueMember")
}

func numberAttr(av map[string]types.AttributeValue, name string) (string, error) {
	switch n := av[name].(type) {
	case *types.AttributeValueMemberN:
		return n.Value, nil
	case nil:
		return "", fmt.Errorf("malformed item: no %s attribute", name)
	default:
		return "", fmt.Errorf("malformed item: %s is %s, not a number", name, typeName(n))
	}
}

// ceilUnix returns t in epoch seconds, rounded up.
func ceilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

// newVersion returns a random non-zero version different from old. Random
// (rather than old+1) versions are never reused after a delete and
// re-create, so a stale compare cannot succeed by coincidence (ABA); two
// writes to one key collide with probability 2⁻⁶⁴.
func newVersion(old driver.Version) driver.Version {
	for {
		v := driver.Version(rand.Uint64())
		if v != driver.NoVersion && v != old {
			return v
		}
	}
}

// PurgeKey deletes key's item whatever it holds (a record, a tombstone, or
// an expired item TTL has not deleted yet) and returns how many items it
// deleted, 0 or 1. It bypasses the compare-and-swap a Breaker relies on: it
// is for a tool that cleans up keys it wrote itself (kvbreaker check).
func (s *Store) PurgeKey(ctx context.Context, key string) (int64, error) {
	if s.closed.Load() {
		return 0, fmt.Errorf("dynamodb: purge %s/%q: %w", s.table, key, ErrClosed)
	}
	out, err := s.client.DeleteItem(ctx, &dyn.DeleteItemInput{
		TableName:    aws.String(s.table),
		Key:          map[string]types.AttributeValue{AttrKey: &types.AttributeValueMemberS{Value: key}},
		ReturnValues: types.ReturnValueAllOld,
	})
	if err != nil {
		return 0, fmt.Errorf("dynamodb: purge %s/%q: %w", s.table, key, err)
	}
	return int64(min(len(out.Attributes), 1)), nil
}
