package nats

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/kvbreaker/kvbreaker/adapter"
)

// A feed that beats on demand (FollowDemand) on a bucket of one server
// proves itself current with a message in the bucket's own stream: a put
// of a reserved subject inside the feed's filter, which every consumer of
// that filter delivers in stream order. A consumer delivers a stream's
// messages in sequence order, and Follow fails on a gap in its sequence,
// so a follower that receives the beat has delivered every message stored
// before it, whoever sent it: one beat serves every follower of the
// prefix's filter, and the fleet's timers, reset by its arrival, send
// about one per heartbeat between them.
//
// A beat's arrival proves every message stored before it delivered, but
// not that nothing was removed: a purge, a subject purged or a message
// deleted reaches no consumer. So the sender reads the stream's state (a
// stream info) just before each beat and carries it in the beat, and
// the beat proves the feed current up to that read, not up to the put:
// every receiver compares the state with the newest it knows (wipe.go's
// check, without a request of its own unless a count fell), and a wipe
// after the read is after the instant the beat proves.
//
// What a beat cannot carry is a time by the receiver's clock: the sender's
// clock is not the receiver's. The server dates the read: a stream info's
// "ts" is the server's time as it answered, carried in the beat, and each
// receiver converts it to its own clock with its own sample of the
// server's clock (a stream info too), as a lower bound
// (adapter.BeatClock). A beat of the receiver's own needs no conversion:
// its read began at a local instant, its Synced; and the read, and the
// put's return (the message's stored timestamp, which the consumer's
// reply subject carries), are samples. A beat that converts to an instant
// after its own arrival cannot be a lower bound (the server's clock
// stepped): it is dropped after one fresh sample.
//
// On a replicated bucket the stream's leader stores a message with its
// own clock, and leadership moves between servers whose clocks a sample
// of one does not link: such a feed beats for itself (follow.go), as it
// does on a server that answers a stream info without its time.
//
// The subject's last token is beatToken, which encodeKey never makes ('='
// followed by anything but two upper-case hex digits): decodeKey rejects
// it, so List never shows it and a feed never delivers it as a record.
// The bucket keeps the newest beat of each filter, one message.
//
// The payload is "kvbreaker-beat SENDER SEQ CREATED LASTSEQ MSGS SUBJECTS
// TS": the stream's state the sender read and the server's time of the
// read, in nanoseconds.
// errBeatRefused: the server refused the user publishing the beat's
// subject.
var errBeatRefused = errors.New("the server refused the beat's subject to this user")

const (
	beatToken   = "=beat"
	beatPayload = "kvbreaker-beat"
)

const (
	// beatSampleEvery is how long one sample of the server's clock
	// converts beats.
	beatSampleEvery = 30 * time.Second
	// beatDriftPPM bounds how far two clocks drift apart, in parts per
	// million of the time since a sample: 500, the most NTP slews a clock.
	beatDriftPPM = 500
)

// beatSubject is the reserved subject of prefix's beats: inside the filter
// of every follower of prefix (filterFor), outside every key's.
func (s *Store) beatSubject(prefix string) string {
	i := strings.LastIndexByte(prefix, '/')
	if i < 0 {
		return s.subjPre + beatToken
	}
	return s.subjPre + encodeKey(prefix[:i]) + "." + beatToken
}

// isBeat reports whether subject is a beat's (of any prefix).
func isBeat(subject string) bool {
	return subject == beatToken || strings.HasSuffix(subject, "."+beatToken)
}

// fleetBeats is one follower's beating on demand for the fleet, on the
// feed's goroutine.
type fleetBeats struct {
	f       *follower
	subject string
	id      string
	// jitter, drawn anew with each Synced, is how much longer than the
	// heartbeat this feed lets its newest Synced age before it beats:
	// followers asked at once beat one after another, so the first one's
	// beat arrives before the others send theirs.
	jitter time.Duration
	clock  *adapter.BeatClock
	// seq numbers this follower's beats; sent is when the one under way
	// was sent (zero: none is), read when its stream info was sent (the
	// instant it proves), ownSeq its stream sequence.
	seq, ownSeq uint64
	sent, read  time.Time
}

// beatCounts counts, over every feed of the process, the fleet beats sent
// (unanswered: those whose put ended without the server's answer, stored
// or not), the wipe checks riding on them, the clock samples, and the
// beats dropped as dated after their arrival: what the feed cost model
// (internal/model) is held to against the server's own count.
var beatCounts struct{ sent, unanswered, checks, samples, rejected, seeds atomic.Int64 }

// beatSkew, set by tests only, moves every other follower's beat's server
// time (of its read) on by that many nanoseconds before it is converted, as a
// server clock stepped ahead would; acceptLateBeats delivers a beat whatever
// instant it converts to: together, the negative control of the arrival
// check.
var (
	beatSkew        atomic.Int64
	acceptLateBeats atomic.Bool
)

// ignoreOthersBeats, set by tests only, makes a follower take no Synced
// from another's beat: the negative control of the fleet's sharing.
var ignoreOthersBeats atomic.Bool

func newFleetBeats(f *follower) *fleetBeats {
	b := &fleetBeats{f: f, subject: f.s.beatSubject(f.Prefix), id: nuid.Next()}
	b.clock = &adapter.BeatClock{Sample: b.sample, Every: beatSampleEvery, Fresh: b.timeout(),
		DriftPPM: beatDriftPPM, Unit: time.Microsecond}
	b.drawJitter()
	return b
}

// timeout bounds a request, and the time a beat of the follower's own may
// take to come back.
func (b *fleetBeats) timeout() time.Duration { return max(b.f.Heartbeat, time.Second) }

func (b *fleetBeats) drawJitter() { b.jitter = rand.N(b.f.Heartbeat/8 + 1) }

// streamInfo reads the stream's info in one request, between the local
// instants before and after.
func (b *fleetBeats) streamInfo(ctx context.Context) (before time.Time, info *jetstream.StreamInfo, after time.Time, err error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout())
	defer cancel()
	before = time.Now()
	st, err := b.f.s.js.Stream(ctx, b.f.s.stream)
	if err != nil {
		return before, nil, after, err
	}
	info = st.CachedInfo()
	if info.TimeStamp.IsZero() {
		return before, nil, after, fmt.Errorf("the server answered a stream info without its time")
	}
	return before, info, time.Now(), nil
}

// sample reads the server's clock (adapter.BeatClock.Sample).
func (b *fleetBeats) sample(ctx context.Context) (before, srv, after time.Time, err error) {
	before, info, after, err := b.streamInfo(ctx)
	if err != nil {
		return before, srv, after, fmt.Errorf("sample the server's clock: %w", err)
	}
	beatCounts.samples.Add(1)
	return before, info.TimeStamp, after, nil
}

// seed puts a message on the beat's subject and then reads the session's
// first stream state again, so that the state every later check is
// compared with counts the subject: the prefix's first beat would
// otherwise add a subject and a message to the counts as a wipe takes one
// of each away, and hide it. The message is not a beat (receivers date
// nothing by it); the subject then holds a message for the session, each
// beat replacing the last (a purge that takes it is a wipe, seen).
//
// refused reports that the server refused the user the subject: the feed
// then proves itself on its own (follow.go), and needs no seed.
func (b *fleetBeats) seed(ctx context.Context) (refused bool, err error) {
	pctx, cancel := context.WithTimeout(ctx, b.timeout())
	_, err = b.f.s.js.Publish(pctx, b.subject, []byte(beatPayload+" seed"))
	cancel()
	beatCounts.seeds.Add(1)
	if err != nil {
		if b.refused() {
			b.f.beatRefused = true
			return true, nil
		}
		return false, fmt.Errorf("seed the beat's subject: %w", err)
	}
	b.f.wipe.reset()
	return false, b.f.checkWipe(ctx)
}

// refused reports whether the connection's last error is the server's
// refusal of the beat's subject: a publish the user's permissions deny is
// dropped by the server, which tells the connection and not the request,
// so the put ends with its context.
func (b *fleetBeats) refused() bool {
	le := b.f.s.nc.LastError()
	return errors.Is(le, natsgo.ErrPermissionViolation) && strings.Contains(le.Error(), `"`+b.subject+`"`)
}

// due reports whether a beat is wanted at now: the newest Synced is older
// than the heartbeat and the jitter, and no beat of this follower's own
// is under way.
func (b *fleetBeats) due(now time.Time) bool {
	return b.sent.IsZero() && now.Sub(b.f.Last()) >= b.f.Heartbeat+b.jitter
}

// send reads the stream's state and puts a beat carrying it. The put's
// acknowledgement names its stream sequence, which the feed must then
// reach (overdue).
func (b *fleetBeats) send(ctx context.Context) error {
	before, info, after, err := b.streamInfo(ctx)
	if err != nil {
		return fmt.Errorf("check the stream before a beat: %w", err)
	}
	beatCounts.checks.Add(1)
	b.clock.Observe(before, info.TimeStamp, after)
	st := info.State
	// Compared here, not only when the beat comes back: a later beat of
	// another's replaces this one in the stream when it is put first, and
	// this follower's Synced is still dated by this read.
	if err := b.f.compareWipe(ctx, info.Created, st, false); err != nil {
		return err
	}
	b.seq++
	sent := time.Now()
	pctx, cancel := context.WithTimeout(ctx, b.timeout())
	defer cancel()
	ack, err := b.f.s.js.Publish(pctx, b.subject, fmt.Appendf(nil, "%s %s %d %d %d %d %d %d", beatPayload, b.id, b.seq,
		info.Created.UnixNano(), st.LastSeq, st.Msgs, st.NumSubjects, info.TimeStamp.UnixNano()))
	beatCounts.sent.Add(1)
	if err != nil {
		beatCounts.unanswered.Add(1)
		if b.refused() {
			return fmt.Errorf("put a beat: %w", errBeatRefused)
		}
		return fmt.Errorf("put a beat: %w", err)
	}
	b.sent, b.read, b.ownSeq = sent, before, ack.Sequence
	return nil
}

// overdue fails the session when the feed has not reached its own beat
// within the timeout: the consumer no longer delivers (deleted with its
// stream, or by an operator).
func (b *fleetBeats) overdue(now time.Time) error {
	if !b.sent.IsZero() && now.Sub(b.sent) > b.timeout() {
		return fmt.Errorf("%w: the feed's own beat did not arrive within %v", ErrFeedStalled, b.timeout())
	}
	return nil
}

// received handles a message of the feed, stream sequence sseq, that
// arrived at arrival after the snapshot: it returns the instant, by this
// process's clock, before which every message of the filter has been
// delivered and no wipe went unseen, and ok when that is newer than the
// newest Synced. The follower's own beat is proven by any message at or
// after its sequence: a later beat of the same subject replaces it in the
// stream (the bucket keeps one message per subject), and the consumer
// then delivers that one instead; it proves the instant its read began.
// Another's beat is dated by the server's time of its read; the stream
// state it carries is checked for a wipe (ErrFeedWiped).
func (b *fleetBeats) received(ctx context.Context, m *natsgo.Msg, sseq uint64, arrival time.Time) (at time.Time, ok bool, err error) {
	if b.ownSeq != 0 && sseq >= b.ownSeq {
		// Stored after its read, which began at b.read by this clock;
		// and its return is a sample of the server's clock.
		at = b.read
		if tb, ok := ackTime(m.Reply); ok && sseq == b.ownSeq {
			b.clock.Observe(b.sent, tb, arrival)
		}
		b.sent, b.read, b.ownSeq = time.Time{}, time.Time{}, 0
	}
	if isBeat(strings.TrimPrefix(m.Subject, b.f.s.subjPre)) {
		var other time.Time
		if other, err = b.beat(ctx, m, sseq, arrival); other.After(at) {
			at = other
		}
	}
	if err != nil || at.IsZero() || !at.After(b.f.Last()) {
		return time.Time{}, false, err
	}
	b.drawJitter()
	return at, true, nil
}

// beat handles a beat, of this follower's own or another's: the wipe
// check it carries, and the instant another's proves.
func (b *fleetBeats) beat(ctx context.Context, m *natsgo.Msg, sseq uint64, arrival time.Time) (time.Time, error) {
	fields := strings.Fields(string(m.Data))
	if len(fields) != 8 || fields[0] != beatPayload {
		return time.Time{}, nil // not a beat kvbreaker sent: its date is unknown
	}
	var n [5]int64
	for i := range n {
		var err error
		if n[i], err = strconv.ParseInt(fields[3+i], 10, 64); err != nil {
			return time.Time{}, nil
		}
	}
	state := jetstream.StreamState{LastSeq: uint64(n[1]), Msgs: uint64(n[2]), NumSubjects: uint64(n[3])}
	if err := b.f.compareWipe(ctx, time.Unix(0, n[0]), state, true); err != nil {
		// A wipe, or a stream the check could not read: no Synced.
		return time.Time{}, err
	}
	if fields[1] == b.id || ignoreOthersBeats.Load() {
		return time.Time{}, nil
	}
	read := time.Unix(0, n[4])
	at, late, err := b.clock.Date(ctx, read.Add(time.Duration(beatSkew.Load())), arrival)
	if err != nil {
		return time.Time{}, err
	}
	if late && !acceptLateBeats.Load() {
		beatCounts.rejected.Add(1)
		return time.Time{}, nil
	}
	return at, nil
}

// ackTime reads a consumer message's stored timestamp (the server's
// clock, in nanoseconds) from its reply subject (ackMeta's layout).
func ackTime(reply string) (time.Time, bool) {
	tokens := strings.Split(reply, ".")
	base := 2
	if len(tokens) >= 11 {
		base = 4
	}
	if len(tokens) < base+7 {
		return time.Time{}, false
	}
	ns, err := strconv.ParseInt(tokens[base+5], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}
