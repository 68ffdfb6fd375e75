package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/adapter"
)

// A feed that beats on demand (FollowDemand) proves itself current with a
// PUBLISH on __redis__:invalidate, the channel every follower of the server
// subscribes to for its invalidations: Redis writes the message to each
// subscriber after every invalidation it queued for it before the PUBLISH
// ran, so whoever sends it, each follower that receives it has received
// every invalidation of a write before it. One beat serves the fleet.
//
// What a beat cannot carry is a time by the receiver's clock: the sender's
// clock is not the receiver's. So it carries the server's: the sender's
// lower bound of the server's clock when the PUBLISH ran (its last TIME
// sample, moved on by its own monotonic clock since, less the drift
// allowed), and each receiver converts it to its own clock with its own
// TIME sample, as a lower bound again (adapter.BeatClock). Neither
// process's wall clock takes part; each TIME sample serves
// beatSampleEvery. A beat that converts to an
// instant after its own arrival cannot be a lower bound (a clock stepped,
// or a sender that got it wrong): it is dropped, after one fresh sample.
//
// A SWAPDB sends no invalidation, so a beat's arrival does not prove that
// the database was not swapped: its sender checks its marker (wipe.go)
// before every beat, after reading the instant the beat is dated by, and a
// follower with a marker of its own takes another's beat only when it
// carries such a check of the same database. A check on only every fourth
// beat would let a beat vouch for the other database's records for up to
// four heartbeats.
//
// The payload is "kvbreaker:beat:DB:SENDER:SEQ:MICROS:CHECKED" (SENDER the
// subscriber's client id, CHECKED 1 when the sender confirmed its marker
// just before; 0 when the ACL refused it a marker), or "kvbreaker:beat:DB:SENDER:wiped" when that
// check found the database swapped: every follower of DB resynchronises.
// No key has a name of this form under a prefix a Breaker follows, and an
// invalidation arrives as an array of keys, never as one string.
const beatPrefix = "kvbreaker:beat:"

const (
	// beatSampleEvery is how long one TIME sample converts beats.
	beatSampleEvery = 30 * time.Second
	// beatDriftPPM bounds how far two clocks drift apart, in parts per
	// million of the time since a sample: 500, the most NTP slews a clock.
	beatDriftPPM = 500
)

// beats is one session's beating on demand, on the session's goroutine.
type beats struct {
	f      *follower
	db     int
	sid    int64
	marker string
	tc     *goredis.Conn

	// DemandBeats holds the newest Synced, this session's own beat under
	// way, and dates this session's beats and others' (Clock: a TIME
	// sample serves beatSampleEvery).
	adapter.DemandBeats
	// ownCheck is when this session last checked its own marker (or set
	// it).
	ownCheck time.Time
	// noPublish: the server refused the PUBLISH (ACL): the session beats
	// with its own PINGs.
	noPublish bool
}

// acceptFutureBeats, set by tests only, delivers a beat whatever instant
// it converts to: the negative control of the arrival check.
var acceptFutureBeats atomic.Bool

// beatCounts counts, over every feed of the process, the beats on demand
// sent, the wipe checks and the clock samples: what the feed cost model
// (internal/model) is held to against the server's own count.
var beatCounts struct{ sent, checks, samples, rejected atomic.Int64 }

// newBeats starts a session's beating on demand: sid is its subscriber's
// client id, marker its marker key (wipe.go; empty without one), tc the
// connection that checks it.
func newBeats(f *follower, db int, sid int64, marker string, tc *goredis.Conn) *beats {
	b := &beats{f: f, db: db, sid: sid, marker: marker, tc: tc, ownCheck: time.Now()}
	b.Heartbeat = f.hb
	b.Dropped, b.KeepLate = &beatCounts.rejected, &acceptFutureBeats
	b.Clock = adapter.BeatClock{Sample: b.sample, Every: beatSampleEvery, Fresh: f.callTimeout(),
		DriftPPM: beatDriftPPM, Unit: time.Microsecond}
	return b
}

// sample reads the server's clock (adapter.BeatClock.Sample).
func (b *beats) sample(ctx context.Context) (before, srv, after time.Time, err error) {
	ctx, cancel := context.WithTimeout(ctx, b.f.callTimeout())
	defer cancel()
	before = time.Now()
	srv, err = b.f.s.c.Time(ctx).Result()
	if err != nil {
		return before, srv, after, fmt.Errorf("sample the server's clock: %w", err)
	}
	beatCounts.samples.Add(1)
	return before, srv, time.Now(), nil
}

// send sends a beat (the caller found one Due: none is under way);
// usePing says the server refuses the PUBLISH and the caller must PING
// instead.
func (b *beats) send(ctx context.Context) (usePing bool, err error) {
	if b.noPublish {
		return true, nil
	}
	if err := b.Clock.Refresh(ctx, time.Now(), false); err != nil {
		return false, err
	}
	// A lower bound of the server's clock as the PUBLISH runs (now read
	// after any sample, which ServerAt moves on from).
	now := time.Now()
	tb := b.Clock.ServerAt(now)
	check := 0
	if b.marker != "" {
		if err := b.f.checkDB(ctx, b.tc, b.marker); err != nil {
			if errors.Is(err, ErrFeedWiped) {
				_ = b.publish(ctx, fmt.Sprintf("%s%d:%d:wiped", beatPrefix, b.db, b.sid))
			}
			return false, err
		}
		check = 1
		beatCounts.checks.Add(1)
		b.ownCheck = time.Now()
	}
	err = b.publish(ctx, fmt.Sprintf("%s%d:%d:%d:%d:%d", beatPrefix, b.db, b.sid, b.Next(), tb.UnixMicro(), check))
	switch {
	case err != nil && strings.HasPrefix(err.Error(), "NOPERM"):
		b.noPublish = true
		return true, nil
	case err != nil:
		return false, fmt.Errorf("publish a beat: %w", err)
	}
	b.Sent(now)
	beatCounts.sent.Add(1)
	return false, nil
}

func (b *beats) publish(ctx context.Context, payload string) error {
	ctx, cancel := context.WithTimeout(ctx, b.f.callTimeout())
	defer cancel()
	return b.f.s.c.Publish(ctx, invalidateChannel, payload).Err()
}

// overdue fails the session when its own beat has not come back within
// the call timeout: the subscriber no longer receives. It also keeps the
// session's marker alive when no beat of its own has checked it for half
// its lifetime (an idle fleet, or a follower others always beat before),
// so that a marker that expired is not taken for a swapped database.
func (b *beats) overdue(ctx context.Context, now time.Time) error {
	if b.Overdue(now, b.f.callTimeout()) {
		return fmt.Errorf("the feed's own beat did not arrive within %v", b.f.callTimeout())
	}
	if b.marker != "" && now.Sub(b.ownCheck) > markerTTL/2 {
		if err := b.f.checkDB(ctx, b.tc, b.marker); err != nil {
			if errors.Is(err, ErrFeedWiped) {
				_ = b.publish(ctx, fmt.Sprintf("%s%d:%d:wiped", beatPrefix, b.db, b.sid))
			}
			return err
		}
		b.ownCheck = now
		beatCounts.checks.Add(1)
	}
	return nil
}

// received handles a beat: at is the instant, by this process's clock,
// before which every invalidation has been received, and ok is set when
// it is newer than the last Synced. A beat of another database's feed
// proves the same (the invalidations are the server's, whatever the
// database) but its check is not of this database.
func (b *beats) received(ctx context.Context, payload string, conns int) (at time.Time, ok bool, err error) {
	arrival := time.Now()
	if err := b.f.checkConns(conns); err != nil {
		return time.Time{}, false, err
	}
	fields := strings.Split(strings.TrimPrefix(payload, beatPrefix), ":")
	if len(fields) < 3 {
		return time.Time{}, false, fmt.Errorf("a beat %q of an unknown form", payload)
	}
	db, err1 := strconv.Atoi(fields[0])
	sid, err2 := strconv.ParseInt(fields[1], 10, 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, false, fmt.Errorf("a beat %q of an unknown form", payload)
	}
	if len(fields) == 3 && fields[2] == "wiped" {
		if db != b.db {
			return time.Time{}, false, nil
		}
		return time.Time{}, false, fmt.Errorf("%w: the follower with client id %d found its marker gone", ErrFeedWiped, sid)
	}
	if b.f.want == nil {
		// A feed that beats on its own delivers its own PINGs' Synced
		// only.
		return time.Time{}, false, nil
	}
	if len(fields) != 5 {
		return time.Time{}, false, fmt.Errorf("a beat %q of an unknown form", payload)
	}
	seq, err1 := strconv.ParseUint(fields[2], 10, 64)
	micros, err2 := strconv.ParseInt(fields[3], 10, 64)
	if err1 != nil || err2 != nil || (fields[4] != "0" && fields[4] != "1") {
		return time.Time{}, false, fmt.Errorf("a beat %q of an unknown form", payload)
	}
	tb := time.UnixMicro(micros)
	var sent time.Time
	own := false
	if sid == b.sid {
		sent, own = b.Own(seq)
	}
	if !own && b.marker != "" && (fields[4] != "1" || db != b.db) {
		// No check of this database's marker before it: a swap may
		// precede it unseen.
		return time.Time{}, false, nil
	}
	if own {
		// This session's own: sent before the PUBLISH ran, by this
		// clock.
		return sent, b.Synced(sent), nil
	}
	return b.Other(ctx, tb, arrival)
}
