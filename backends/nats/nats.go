// Package nats is a driver.Store in a NATS JetStream key-value bucket
// (github.com/nats-io/nats.go and its jetstream package; nats-server 2.11
// or later, for per-message TTLs). Beside nats.go's own package, import one
// of them under another name (this repository's docs call nats.go natsgo):
//
//	import natsgo "github.com/nats-io/nats.go"
//
// A bucket is a stream (KV_<bucket>) whose subjects are $KV.<bucket>.<key>.
// The Store needs one that keeps one revision per key (History 1) and
// allows per-message TTLs; New and Dial create it so (jetstream
// KeyValueConfig{History: 1, LimitMarkerTTL: …}) when it does not exist, and
// refuse one that is otherwise. Keys are mapped to subjects reversibly:
// each "/"-separated segment of a key is one subject token, its bytes
// outside A-Z, a-z, 0-9, '-' and '_' written as '=' and two hex digits
// ("inbox.example" is inbox=2Eexample), so that a prefix kvbreaker.Prefixed
// makes ("fleet-a/") is a subject filter ("fleet-a.>").
//
// The version is the message's stream sequence, which the stream never
// reuses (a deleted bucket that is created again starts over: do not
// delete a live fleet's bucket). Compare-and-swap is one publish with
// Nats-Expected-Last-Subject-Sequence (0 to create; after a tombstone, the
// tombstone's sequence), sent once: a refused compare is followed by a read
// of the key, so a conflict carries its current value and version in a
// second round trip. A publish whose answer does not come because the
// connection broke returns ErrConnectionLost at once (the write may have
// been applied: the outcome is unknown), never a conflict with itself.
// Reads go to the stream's leader (JetStream's message-get API, not the
// direct get that any replica may answer), so they are not stale.
//
// Every write carries its TTL in the Nats-TTL header, rounded up to whole
// seconds (the server counts TTLs in seconds and refuses less than one):
// the server removes the message once it is that old, by its own clock,
// within ExpiryLate. A removal leaves a subject delete marker (the bucket's
// LimitMarkerTTL), which a Follow reports as a Delete. A delete is a purge
// marker that rolls up the key's subject and itself expires after the
// tombstone TTL (WithTombstoneTTL, default DefaultTombstoneTTL): Get, List
// and Follow's snapshot skip markers, and a create expects the marker's
// sequence.
//
// The Store lists keys (driver.Lister), reads a key's remaining TTL
// (driver.ExpiryReader) and follows a prefix (driver.Follower; see
// Store.Follow). Errors other than driver.ErrNotFound and conflicts are
// *driver.OpError naming the server without credentials: "nats: get
// host.example: nats: timeout (via nats://127.0.0.1:4222)"; JetStream's
// refusals unwrap to *jetstream.APIError. Every call is bounded by its
// context only; the Store sends no request of its own except Follow's.
package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// backend names the adapter in its errors.
const backend = "nats"

var (
	// ErrClosed is the cause of a Store method's *driver.OpError after
	// Close.
	ErrClosed = errors.New("store closed")
	// ErrConnectionLost: the connection broke while a request was in
	// flight; the server may have applied it (the outcome is unknown).
	ErrConnectionLost = errors.New("connection lost with the request in flight (outcome unknown)")
	// ErrNotConnected: the connection was down (reconnecting) until the
	// call's context ended, so the request was not sent.
	ErrNotConnected = errors.New("not connected")
)

const (
	// DefaultTombstoneTTL is how long a delete's marker stays in the
	// bucket, and the LimitMarkerTTL of a bucket New creates (how long
	// the marker of an expired key stays).
	DefaultTombstoneTTL = time.Minute
	// ExpiryLate is how long after its TTL the server may still hold a
	// message: it keeps TTLs in a wheel of 1 s ticks and checks it at
	// most every 250 ms (measured by the conformance suite's expiry
	// cases, see DefaultTraits).
	ExpiryLate = 1500 * time.Millisecond
)

// JetStream header names and values the Store writes and reads.
const (
	hdrExpectSubjSeq = "Nats-Expected-Last-Subject-Sequence"
	hdrExpectStream  = "Nats-Expected-Stream"
	hdrTTL           = "Nats-TTL"
	hdrRollup        = "Nats-Rollup"
	hdrMarkerReason  = "Nats-Marker-Reason"
	hdrKVOp          = "KV-Operation"
	kvDel            = "DEL"
	kvPurge          = "PURGE"
)

// Store is a driver.Store in a JetStream key-value bucket. It is safe for
// concurrent use. The zero value is not usable; call New or Dial.
type Store struct {
	nc      *natsgo.Conn
	owns    bool
	js      jetstream.JetStream
	bucket  string
	stream  string // KV_<bucket>
	subjPre string // $KV.<bucket>.
	via     string
	conn    *connWatch
	tomb    int64 // seconds a delete marker lives
	// replicated: the bucket has several replicas (Follow places its
	// consumer on the stream's leader).
	replicated bool
	closed     atomic.Bool

	writes, conflicts atomic.Uint64
}

// options collects the Options of New and Dial.
type options struct {
	replicas int
	tomb     time.Duration
}

// Option configures a Store.
type Option func(*options)

// WithReplicas sets the replicas of a bucket New creates (default 1; 3 or
// 5 on a cluster). An existing bucket keeps its own.
func WithReplicas(n int) Option { return func(o *options) { o.replicas = n } }

// WithTombstoneTTL sets how long a delete's marker stays (default
// DefaultTombstoneTTL, at least 1 s, whole seconds rounded up), and the
// LimitMarkerTTL of a bucket New creates.
func WithTombstoneTTL(d time.Duration) Option { return func(o *options) { o.tomb = d } }

var validBucket = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// newOptions applies opts over the defaults and reports every invalid one
// (and the problems the caller found already) as a *driver.OptionError.
func newOptions(bucket string, opts []Option, problems *adapter.Problems) (options, error) {
	o := options{replicas: 1, tomb: DefaultTombstoneTTL}
	for _, opt := range opts {
		opt(&o)
	}
	if !validBucket.MatchString(bucket) {
		problems.Add("bucket", fmt.Sprintf("%q", bucket), "give a name of letters, digits, '-' and '_', e.g. kvbreaker")
	}
	if o.replicas < 1 || o.replicas > 5 {
		problems.Add("WithReplicas", o.replicas, "give 1 to 5")
	}
	if o.tomb < time.Second {
		problems.Add("WithTombstoneTTL", o.tomb, "give 1s or more")
	}
	return o, problems.Err()
}

func optionError(option string, value any, fix string) error {
	return &driver.OptionError{Backend: backend, Option: option, Value: value, Fix: fix}
}

// DefaultSetupTimeout bounds New's requests when its context has no
// deadline.
const DefaultSetupTimeout = 5 * time.Second

// String names the bucket and the server the Store's connection reached
// first, for a tool's output or a log: "nats bucket kvbreaker at
// nats://nats-1:4222", without user information.
func (s *Store) String() string { return "nats bucket " + s.bucket + " at " + s.via }

// New returns a Store over nc, which the caller keeps and closes, in
// bucket: it reads the bucket's configuration, creating the bucket (with
// WithReplicas and WithTombstoneTTL) if it does not exist, and refuses a
// bucket that keeps more than one revision per key or does not allow
// per-message TTLs (a *driver.OptionError saying so). A server that does
// not answer fails it (errors.Is(err, driver.ErrUnreachable)).
// While the connection is down (reconnecting) a call waits for it within
// its context, sending nothing until then (ErrNotConnected if the context
// ends first).
func New(ctx context.Context, nc *natsgo.Conn, bucket string, opts ...Option) (*Store, error) {
	problems := adapter.Problems{Backend: backend}
	if nc == nil {
		problems.Add("connection", "nil", "pass a *nats.Conn, or call Dial")
	}
	o, err := newOptions(bucket, opts, &problems)
	if err != nil {
		return nil, err
	}
	return newStore(ctx, nc, false, bucket, o)
}

func newStore(ctx context.Context, nc *natsgo.Conn, owns bool, bucket string, o options) (*Store, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	s := &Store{
		nc: nc, owns: owns, js: js, bucket: bucket,
		stream: "KV_" + bucket, subjPre: "$KV." + bucket + ".",
		via:  redactURL(nc.ConnectedUrlRedacted()),
		tomb: adapter.CeilSeconds(o.tomb),
	}
	if s.via == "" {
		s.via = redactURL(nc.Opts.Url)
	}
	ctx, cancel := adapter.DialContext(ctx, DefaultSetupTimeout)
	defer cancel()
	s.conn = watchConn(nc)
	if _, err := s.conn.connected(ctx); err != nil {
		s.conn.stop()
		return nil, s.setupError("open bucket", err)
	}
	if err := s.ensureBucket(ctx, o); err != nil {
		s.conn.stop()
		return nil, err
	}
	return s, nil
}

// ensureBucket creates the bucket if it is missing and checks its
// configuration.
func (s *Store) ensureBucket(ctx context.Context, o options) error {
	st, err := s.js.Stream(ctx, s.stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = s.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:         s.bucket,
			History:        1,
			Replicas:       o.replicas,
			LimitMarkerTTL: time.Duration(s.tomb) * time.Second,
		})
		if err != nil && !errors.Is(err, jetstream.ErrBucketExists) {
			return s.setupError("create bucket", err)
		}
		st, err = s.js.Stream(ctx, s.stream)
	}
	if err != nil {
		return s.setupError("open bucket", err)
	}
	cfg := st.CachedInfo().Config
	if cfg.MaxMsgsPerSubject != 1 {
		return optionError("bucket", s.bucket, fmt.Sprintf("it keeps %d revisions per key: the Store needs a bucket of History 1 (a deleted key's older revisions would list as live)", cfg.MaxMsgsPerSubject))
	}
	s.replicated = cfg.Replicas > 1
	if !cfg.AllowMsgTTL {
		return optionError("bucket", s.bucket, "it does not allow per-message TTLs: create it with LimitMarkerTTL set (nats kv add --marker-ttl), or let New create it")
	}
	return nil
}

// setupError is New's error: unreachable when the server did not answer.
func (s *Store) setupError(op string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, natsgo.ErrTimeout) || errors.Is(err, natsgo.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, natsgo.ErrConnectionClosed) || errors.Is(err, ErrNotConnected) {
		err = &driver.UnreachableError{Backend: backend, Endpoints: []string{s.via}, Reason: "it did not answer JetStream requests: " + err.Error(), Err: err}
	}
	return opError(op, s.bucket, err)
}

// Close releases the Store; later calls fail with ErrClosed. It closes the
// connection only when Dial made it. Keys stay in the bucket until their
// TTL.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.conn.stop()
	if s.owns {
		s.nc.Close()
	}
	return nil
}

// Conn returns the connection the store uses.
func (s *Store) Conn() *natsgo.Conn { return s.nc }

// Bucket returns the bucket's name.
func (s *Store) Bucket() string { return s.bucket }

// Subject returns the subject key is stored under.
func (s *Store) Subject(key string) string { return s.subjPre + encodeKey(key) }

// Traits: see DefaultTraits.
func (s *Store) Traits() driver.Traits { return DefaultTraits() }

// DefaultTraits is what a Store declares: atomic compares, reads that are
// not stale, relative expiry by the server's clock in whole seconds rounded
// up (at least 1 s), never early, late by up to ExpiryLate. Package skew's
// NATS profile equals it (checked by this package's tests).
func DefaultTraits() driver.Traits {
	return adapter.ServerExpiry{Granularity: time.Second, MinTTL: time.Second, Late: ExpiryLate}.Traits()
}

// Stats counts a Store's work since it was made.
type Stats struct {
	// Writes is the number of compare-and-swaps and compare-and-deletes
	// published (won or lost).
	Writes uint64
	// Conflicts is the number of them that lost.
	Conflicts uint64
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats { return Stats{Writes: s.writes.Load(), Conflicts: s.conflicts.Load()} }

// Get implements driver.Store with a read of the key's last message from
// the stream's leader; a marker (a delete, an expiry) is absent.
func (s *Store) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	const op = adapter.OpGet
	if s.closed.Load() {
		return nil, 0, opError(op, key, ErrClosed)
	}
	m, err := s.last(ctx, key)
	if err != nil {
		return nil, 0, s.callError(op, key, err)
	}
	if m == nil || m.marker() {
		return nil, driver.NoVersion, driver.ErrNotFound
	}
	return m.Data, driver.Version(m.Seq), nil
}

// CompareAndSwap implements driver.Store: one publish expecting old as the
// subject's last sequence (0, or a marker's sequence, to create), with the
// TTL in whole seconds. A refused compare reads the key for the
// *driver.ConflictError; a create that finds a marker publishes again
// expecting it.
func (s *Store) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	const op = adapter.OpSwap
	if err := s.gate().Swap(key, ttl); err != nil {
		return 0, err
	}
	subj := s.Subject(key)
	ttlSec := strconv.FormatInt(adapter.CeilSeconds(ttl), 10)
	expect := uint64(old)
	// A refused publish applied nothing, so it may be sent again: a create
	// that meets a marker expects the marker; a read that still shows old
	// (a replicated stream refuses for a write its leader has proposed but
	// not yet applied, which the read cannot see yet) means the refusal's
	// cause is not visible yet, and reporting old as the conflicting
	// version would be no state the key ever had after the refusal.
	for range maxRounds {
		msg := natsgo.NewMsg(subj)
		msg.Data = value
		msg.Header.Set(hdrTTL, ttlSec)
		msg.Header.Set(hdrExpectSubjSeq, strconv.FormatUint(expect, 10))
		msg.Header.Set(hdrExpectStream, s.stream)
		seq, err := s.publish(ctx, msg)
		if err == nil {
			return driver.Version(seq), nil
		}
		if !wrongLastSeq(err) {
			return 0, s.callError(op, key, err)
		}
		m, err := s.last(ctx, key)
		if err != nil {
			return 0, s.callError(op, key, err)
		}
		switch {
		case old == driver.NoVersion && m == nil:
			expect = 0
			continue
		case old == driver.NoVersion && m.marker():
			expect = m.Seq
			continue
		case old != driver.NoVersion && m != nil && !m.marker() && m.Seq == uint64(old):
			continue
		}
		s.conflicts.Add(1)
		if m == nil || m.marker() {
			return 0, &driver.ConflictError{}
		}
		return 0, &driver.ConflictError{Value: m.Data, Version: driver.Version(m.Seq)}
	}
	return 0, s.callError(op, key, errRefusedUnseen)
}

// maxRounds bounds the publishes of one compare-and-swap or
// compare-and-delete.
const maxRounds = 16

// errRefusedUnseen: every publish was refused while the key's read showed
// the expected version or tombstone throughout.
var errRefusedUnseen = errors.New("the server kept refusing the compare while the key read as expected")

// CompareAndDelete implements driver.Store: one publish of a purge marker
// (rolling up the key's subject, living the tombstone TTL) expecting old as
// the subject's last sequence. A refused compare reads the key: absent (or
// a marker) is driver.ErrNotFound, another version a *driver.ConflictError.
// Sent once, like CompareAndSwap: ErrNotFound always means another writer
// deleted the key.
func (s *Store) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	const op = adapter.OpDelete
	if s.closed.Load() {
		return opError(op, key, ErrClosed)
	}
	if old == driver.NoVersion {
		// Nothing to delete: absent is not found, anything else a conflict.
		m, err := s.last(ctx, key)
		if err != nil {
			return s.callError(op, key, err)
		}
		return s.deleteConflict(m)
	}
	for range maxRounds {
		msg := natsgo.NewMsg(s.Subject(key))
		msg.Header.Set(hdrKVOp, kvPurge)
		msg.Header.Set(hdrRollup, "sub")
		msg.Header.Set(hdrTTL, strconv.FormatInt(s.tomb, 10))
		msg.Header.Set(hdrExpectSubjSeq, strconv.FormatUint(uint64(old), 10))
		msg.Header.Set(hdrExpectStream, s.stream)
		_, err := s.publish(ctx, msg)
		if err == nil {
			return nil
		}
		if !wrongLastSeq(err) {
			return s.callError(op, key, err)
		}
		m, err := s.last(ctx, key)
		if err != nil {
			return s.callError(op, key, err)
		}
		if m != nil && !m.marker() && m.Seq == uint64(old) {
			continue // as in CompareAndSwap: the refusal's cause is not visible yet
		}
		return s.deleteConflict(m)
	}
	return s.callError(op, key, errRefusedUnseen)
}

// deleteConflict is a refused delete's error given the key's last message.
func (s *Store) deleteConflict(m *storedMsg) error {
	if m == nil || m.marker() {
		return driver.ErrNotFound
	}
	s.conflicts.Add(1)
	return &driver.ConflictError{Value: m.Data, Version: driver.Version(m.Seq)}
}

// pubAck is JetStream's answer to a publish.
type pubAck struct {
	Stream string              `json:"stream"`
	Seq    uint64              `json:"seq"`
	Error  *jetstream.APIError `json:"error,omitempty"`
}

// publish sends msg once and returns its stream sequence, or JetStream's
// refusal as a *jetstream.APIError.
func (s *Store) publish(ctx context.Context, msg *natsgo.Msg) (uint64, error) {
	s.writes.Add(1)
	resp, err := s.request(ctx, msg)
	if err != nil {
		return 0, err
	}
	var ack pubAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return 0, fmt.Errorf("answer %q: %w", resp.Data, err)
	}
	if ack.Error != nil {
		return 0, ack.Error
	}
	if ack.Seq == 0 {
		return 0, fmt.Errorf("answer %q carries no sequence", resp.Data)
	}
	return ack.Seq, nil
}

// wrongLastSeq reports a refused compare (10071, or 10164 from a
// replicated stream).
func wrongLastSeq(err error) bool {
	var ae *jetstream.APIError
	return errors.As(err, &ae) && (ae.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || ae.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// storedMsg is a message as the stream leader's message-get API returns it.
type storedMsg struct {
	Subject string    `json:"subject"`
	Seq     uint64    `json:"seq"`
	Hdrs    []byte    `json:"hdrs,omitempty"`
	Data    []byte    `json:"data,omitempty"`
	Time    time.Time `json:"time"`
	header  natsgo.Header
}

// marker reports a delete, purge or subject delete marker.
func (m *storedMsg) marker() bool { return isMarker(m.header) }

func isMarker(h natsgo.Header) bool {
	if len(h) == 0 {
		return false
	}
	switch h.Get(hdrKVOp) {
	case kvDel, kvPurge:
		return true
	}
	return h.Get(hdrMarkerReason) != ""
}

// last reads key's last message from the stream's leader: nil when the
// subject has none.
func (s *Store) last(ctx context.Context, key string) (*storedMsg, error) {
	return s.getMsg(ctx, map[string]any{"last_by_subj": s.Subject(key)})
}

func (s *Store) getMsg(ctx context.Context, req map[string]any) (*storedMsg, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	msg := natsgo.NewMsg("$JS.API.STREAM.MSG.GET." + s.stream)
	msg.Data = body
	resp, err := s.request(ctx, msg)
	if err != nil {
		return nil, err
	}
	var r struct {
		Message *storedMsg          `json:"message"`
		Error   *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return nil, fmt.Errorf("answer %q: %w", resp.Data, err)
	}
	if r.Error != nil {
		if r.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, nil
		}
		return nil, r.Error
	}
	if r.Message == nil {
		return nil, fmt.Errorf("answer %q carries no message", resp.Data)
	}
	if len(r.Message.Hdrs) > 0 {
		h, err := natsgo.DecodeHeadersMsg(r.Message.Hdrs)
		if err != nil {
			return nil, fmt.Errorf("headers of message %d: %w", r.Message.Seq, err)
		}
		r.Message.header = h
	}
	return r.Message, nil
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

// callError is opError for a failed request: the cause names the server.
func (s *Store) callError(op, key string, err error) error {
	return opError(op, key, adapter.Explained(err, "%v (via %s)", err, s.via))
}
