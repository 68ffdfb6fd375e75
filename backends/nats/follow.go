package nats

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// Why a Follow sends ChangeLost, besides ErrConnectionLost and JetStream's
// own errors, which Lost's Err wraps.
var (
	// ErrFeedDisconnected: the connection the feed came over broke.
	ErrFeedDisconnected = errors.New("connection lost")
	// ErrFeedGap: a message of the consumer's sequence never arrived (the
	// client dropped it as a slow consumer, or the server lost it).
	ErrFeedGap = errors.New("feed skipped a message")
	// ErrFeedStalled: the consumer said it had sent messages that did not
	// arrive within the stall timeout.
	ErrFeedStalled = errors.New("feed stalled")
	// ErrLeaderMoved: the consumer is not (or no longer) on the stream's
	// leader.
	ErrLeaderMoved = errors.New("consumer not on the stream leader")
	// ErrFeedClosed: the subscription ended without Follow ending it.
	ErrFeedClosed = errors.New("subscription closed")
)

// Follow's limits.
const (
	// followBuffer is how many messages the subscription holds before
	// nats.go drops them (which Follow then reports as ErrFeedGap).
	followBuffer = 4096
	// maxPendingBeats bounds the heartbeats waiting for the feed.
	maxPendingBeats = 8
	// minFollowTimeout is the least a consumer request may take, and the
	// least time after which undelivered messages are a stall.
	minFollowTimeout = 5 * time.Second
	// followConsumerIdle is how long the server keeps the consumer of a
	// Follow whose client died without deleting it.
	followConsumerIdle = 30 * time.Second
)

// Follow implements driver.Follower as a KV watch does (kv.Watch: a
// consumer delivering each key's last message, then every message after
// it), over a consumer of its own so that it can prove what it has
// delivered: an ephemeral push consumer, acknowledging nothing, in memory,
// filtered on the prefix's complete "/"-segments (the rest is filtered
// here), delivering to an inbox of this connection.
//
// The snapshot is the consumer's first messages: as many as it had pending
// when created (each key's last message at that moment, or a later one);
// then Synced with At taken before the consumer was created. A message is
// a Put of its value at its stream sequence (what Get returns); a marker
// (a delete, or the removal of an expired message) is skipped in the
// snapshot and a Delete after it (Version NoVersion).
//
// Synced: every heartbeat, Follow asks the consumer how many messages it
// has sent and has pending (one request), started at t; once every one of
// them has arrived, Follow sends Synced{At: t}. On a replicated bucket the
// consumer runs on the stream's leader, which acknowledges a write only
// once it has applied it (a consumer on a follower would count what that
// follower has applied); Follow creates consumers until one is placed
// there, and each heartbeat also asks the stream who leads it (a second
// request): once the leadership moves, the feed is Lost (ErrLeaderMoved)
// and resynchronised on the new leader.
//
// Lost, then a resynchronisation with a new consumer, follows: a
// disconnection of the connection (ErrFeedDisconnected; a consumer is never
// resumed across one, since the server may have come back with other
// data), a gap in the consumer's sequence (ErrFeedGap), messages the
// consumer sent that do not arrive (ErrFeedStalled, after 5 s or ten
// heartbeats), a consumer the server no longer knows, a closed
// subscription, a delivered message removed behind the adapters' back
// (ErrFeedWiped: wipe.go, one more request per heartbeat). Lost's Err is a *driver.OpError (op "follow", Key the
// prefix). While the server refuses, Follow retries, backing off up to
// 1 s.
//
// Follow returns ctx's error when ctx ends, an OpError wrapping ErrClosed
// once the Store is closed, and an error when it cannot follow at all: a
// non-positive heartbeat, a nil fn, or the server refusing the first
// consumer (no such stream, no permission).
func (s *Store) Follow(ctx context.Context, prefix string, heartbeat time.Duration, fn func(driver.Change)) error {
	return s.follow(ctx, adapter.Feed{Prefix: prefix, Heartbeat: heartbeat, Fn: fn})
}

// FollowDemand implements driver.DemandFollower: Follow, but after each
// snapshot it beats only when want asks and its newest Synced is older
// than heartbeat, so that a mirror with nothing to decide sends nothing.
// On a bucket of one server its beat is a put of a reserved subject in
// the bucket's stream, which every follower of the prefix receives in
// order and dates by the server's clock: one beat serves the fleet, and
// the wipe check's stream info rides on one beat in four heartbeats
// (beat.go). On a replicated bucket it beats as Follow does (a consumer
// info and the wipe check's stream info), for itself alone.
func (s *Store) FollowDemand(ctx context.Context, prefix string, heartbeat time.Duration, want <-chan struct{}, fn func(driver.Change)) error {
	return s.follow(ctx, adapter.Feed{Prefix: prefix, Heartbeat: heartbeat, Demand: true, Want: want, Fn: fn})
}

func (s *Store) follow(ctx context.Context, feed adapter.Feed) error {
	f := &follower{Feed: feed, s: s, filter: s.subjPre + filterFor(feed.Prefix)}
	r := adapter.Resync{Gate: s.gate(), Session: f.once, Refused: refused, Wrap: s.callError}
	return r.Follow(ctx, feed.Prefix, feed.Heartbeat, feed.Demand, feed.Want, feed.Fn)
}

type follower struct {
	adapter.Feed
	s      *Store
	filter string
	wipe   wipeWatch
	// beatRefused: the server refused this feed's fleet beat (beat.go);
	// it proves itself on its own for the rest of the Follow.
	beatRefused bool
}

// refused reports whether err means the server will not let this client
// follow at all, as opposed to not now.
func refused(err error) bool {
	var ae *jetstream.APIError
	if errors.As(err, &ae) && ae.ErrorCode == jetstream.JSErrCodeStreamNotFound {
		return true
	}
	return errors.Is(err, natsgo.ErrPermissionViolation) || errors.Is(err, natsgo.ErrAuthorization)
}

// once follows with one consumer until it fails (the reason) or ctx ends.
// began says a Reset was delivered; synced that a snapshot was delivered
// whole.
func (f *follower) once(ctx context.Context) (began, synced bool, err error) {
	s := f.s
	epoch, err := s.conn.connected(ctx)
	if err != nil {
		return false, false, err
	}
	ch := make(chan *natsgo.Msg, followBuffer)
	// Not under the request inbox prefix, which the requests' shared
	// subscription answers.
	inbox := natsgo.NewInbox()
	sub, err := s.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return false, false, err
	}
	defer sub.Unsubscribe()
	at := time.Now()
	f.wipe.reset()
	if err := f.checkWipe(ctx); err != nil {
		return false, false, err
	}
	// On demand, a bucket of one server whose stream info tells its
	// time beats for the fleet (beat.go).
	var fb *fleetBeats
	if f.Want != nil && !s.replicated && !f.beatRefused && f.wipe.st != nil && !f.wipe.st.CachedInfo().TimeStamp.IsZero() {
		fb = newFleetBeats(f)
		refused, err := fb.seed(ctx)
		if err != nil {
			return false, false, err
		}
		if refused {
			fb = nil
		}
	}
	cons, err := f.consumer(ctx, inbox)
	if err != nil {
		return false, false, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = s.js.DeleteConsumer(dctx, s.stream, cons.CachedInfo().Name) // else it lapses when idle
		cancel()
	}()
	info := cons.CachedInfo()
	initial := info.Delivered.Consumer + info.NumPending

	f.Fn(driver.Change{Kind: driver.ChangeReset})
	began = true
	if initial == 0 {
		synced = true
		f.Synced(at)
	}
	ticker := time.NewTicker(f.Heartbeat)
	defer ticker.Stop()
	stall := max(minFollowTimeout, 10*f.Heartbeat)
	var seen uint64 // the consumer sequence delivered last
	// Heartbeats waiting for the feed: once it has delivered the
	// consumer's messages up to a beat's sequence, every commit before the
	// beat has been delivered.
	pending := adapter.PendingBeats[uint64]{Max: maxPendingBeats}
	// sendBeat asks the consumer's progress (after the wipe check) and
	// adds a beat for it; an error ends the session.
	sendBeat := func() error {
		bat := time.Now()
		beatsSent.Add(1)
		ictx, cancel := context.WithTimeout(ctx, max(f.Heartbeat, time.Second))
		if err := f.checkWipe(ictx); err != nil {
			cancel()
			if errors.Is(err, ErrFeedWiped) || errors.Is(err, jetstream.ErrStreamNotFound) {
				return err
			}
			return nil // unchecked: no Synced
		}
		ci, err := cons.Info(ictx)
		if err == nil && s.replicated {
			var leader string
			if leader, err = f.streamLeader(ictx); err == nil && ci.Cluster != nil && ci.Cluster.Leader != leader {
				cancel()
				return fmt.Errorf("%w: the stream's leader is %s, the consumer on %s", ErrLeaderMoved, leader, ci.Cluster.Leader)
			}
		}
		cancel()
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			return err
		}
		if err != nil || !synced {
			return nil // no Synced: the caller sees the feed fall behind
		}
		pending.Add(bat, ci.Delivered.Consumer+ci.NumPending)
		f.proven(&pending, seen)
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return began, synced, ctx.Err()
		case <-epoch.Done():
			return began, synced, ErrFeedDisconnected
		case m, ok := <-ch:
			if !ok {
				return began, synced, ErrFeedClosed
			}
			cseq, sseq, left, ok := ackMeta(m.Reply)
			if !ok {
				continue // a status message: no sequence
			}
			if cseq != seen+1 {
				return began, synced, fmt.Errorf("%w: consumer sequence %d after %d", ErrFeedGap, cseq, seen)
			}
			seen = cseq
			wasSynced := synced
			f.deliver(m, sseq, synced)
			if !synced && (seen >= initial || left == 0) {
				synced = true
				f.Synced(at)
			}
			if synced {
				f.proven(&pending, seen)
			}
			if fb != nil && wasSynced {
				at, ok, err := fb.received(ctx, m, sseq, time.Now())
				if errors.Is(err, ErrFeedWiped) || errors.Is(err, jetstream.ErrStreamNotFound) {
					return began, synced, err
				}
				if ok {
					f.Synced(at)
				}
			}
		case <-f.Want:
			if fb != nil {
				// Not before the snapshot is whole: a beat arriving
				// before then is not taken as one.
				now := time.Now()
				if !synced || !fb.due(now) {
					continue
				}
				err := fb.send(ctx)
				if errors.Is(err, errBeatRefused) && ctx.Err() == nil {
					// The user may read the bucket but not publish the
					// beat's subject: prove this feed current by its
					// own requests, which reading needs, from now on.
					f.beatRefused, fb = true, nil
				} else {
					if err != nil && (!errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil) {
						return began, synced, err
					}
					continue
				}
			}
			// Not while the newest Synced is fresh, nor while a beat
			// sent within the heartbeat waits for the feed.
			now := time.Now()
			if newest, waiting := pending.Newest(); !f.Due(now, newest, waiting) {
				continue
			}
			if err := sendBeat(); err != nil {
				return began, synced, err
			}
		case <-ticker.C:
			// On demand the ticker only notices a stall.
			if oldest, upTo, waiting := pending.Oldest(); waiting && time.Since(oldest) > stall {
				return began, synced, fmt.Errorf("%w: the consumer sent up to %d, %d arrived in %v", ErrFeedStalled, upTo, seen, stall)
			}
			if fb != nil {
				if err := fb.overdue(time.Now()); err != nil {
					return began, synced, err
				}
				continue
			}
			if f.Want != nil {
				continue
			}
			if err := sendBeat(); err != nil {
				return began, synced, err
			}
		}
	}
}

// maxPlacements bounds the consumers Follow creates to find one on the
// stream's leader.
const maxPlacements = 12

// consumer creates the feed's consumer, delivering to inbox. On a
// replicated bucket it must run on the stream's leader: a consumer on a
// follower delivers and counts what that follower has applied, which can
// trail a write the leader has acknowledged, so its snapshot and its
// progress could miss an acknowledged write. The server places a
// one-replica consumer on a random peer of the stream; Follow deletes one
// placed elsewhere and asks again.
func (f *follower) consumer(ctx context.Context, inbox string) (jetstream.PushConsumer, error) {
	s := f.s
	timeout := f.CallTimeout()
	for range maxPlacements {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		cons, err := s.js.CreatePushConsumer(cctx, s.stream, jetstream.ConsumerConfig{
			Name:              "kvbreaker-follow-" + nuid.Next(),
			DeliverSubject:    inbox,
			DeliverPolicy:     jetstream.DeliverLastPerSubjectPolicy,
			AckPolicy:         jetstream.AckNonePolicy,
			FilterSubject:     f.filter,
			MemoryStorage:     true,
			Replicas:          1,
			InactiveThreshold: max(followConsumerIdle, 4*f.Heartbeat),
		})
		if err != nil || !s.replicated {
			cancel()
			return cons, err
		}
		leader, err := f.streamLeader(cctx)
		info := cons.CachedInfo()
		if err == nil && info.Cluster != nil && info.Cluster.Leader == leader {
			cancel()
			return cons, nil
		}
		_ = s.js.DeleteConsumer(cctx, s.stream, info.Name)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%w: no consumer placed on it in %d tries", ErrLeaderMoved, maxPlacements)
}

// streamLeader names the server leading the bucket's stream.
func (f *follower) streamLeader(ctx context.Context) (string, error) { return f.s.streamLeader(ctx) }

// streamLeader names the server leading the bucket's stream.
func (s *Store) streamLeader(ctx context.Context) (string, error) {
	st, err := s.js.Stream(ctx, s.stream)
	if err != nil {
		return "", err
	}
	if c := st.CachedInfo().Cluster; c != nil {
		return c.Leader, nil
	}
	return "", nil
}

// deliver sends the change m makes: in the snapshot only live keys.
func (f *follower) deliver(m *natsgo.Msg, sseq uint64, live bool) {
	key, ok := decodeKey(strings.TrimPrefix(m.Subject, f.s.subjPre))
	if !ok || !strings.HasPrefix(key, f.Prefix) {
		return
	}
	if isMarker(m.Header) {
		f.wipe.del(m.Subject)
		if live {
			f.Fn(driver.Change{Kind: driver.ChangeDelete, Key: key, Version: driver.NoVersion})
		}
		return
	}
	f.wipe.put(m.Subject)
	f.Fn(driver.Change{Kind: driver.ChangePut, Key: key, Value: m.Data, Version: driver.Version(sseq)})
}

// proven sends Synced for the latest pending beat the feed has reached,
// having delivered the consumer's messages up to seen.
func (f *follower) proven(pending *adapter.PendingBeats[uint64], seen uint64) {
	if at, ok := pending.Reached(seen); ok {
		f.Synced(at)
	}
}

// ackMeta reads a consumer message's sequences and pending count from its
// reply subject: $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>,
// or with a domain and account hash after $JS.ACK and a token at the end.
func ackMeta(reply string) (cseq, sseq, pending uint64, ok bool) {
	tokens := strings.Split(reply, ".")
	if len(tokens) < 9 || tokens[0] != "$JS" || tokens[1] != "ACK" {
		return 0, 0, 0, false
	}
	base := 2
	if len(tokens) >= 11 {
		base = 4
	}
	if len(tokens) < base+7 {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	sseq, err1 = strconv.ParseUint(tokens[base+3], 10, 64)
	cseq, err2 = strconv.ParseUint(tokens[base+4], 10, 64)
	pending, err3 = strconv.ParseUint(tokens[base+6], 10, 64)
	return cseq, sseq, pending, err1 == nil && err2 == nil && err3 == nil
}

// beatsSent counts, over every feed of the process, the beats sent (a
// stream info and a consumer info each): what the feed cost model
// (internal/model) is held to against the connection's own count.
var beatsSent atomic.Int64

var (
	_ driver.Follower       = (*Store)(nil)
	_ driver.DemandFollower = (*Store)(nil)
)
