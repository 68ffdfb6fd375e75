package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kvbreaker/kvbreaker/driver"
)

var _ driver.DemandFollower = (*Store)(nil)

// A feed that beats on demand (FollowDemand) proves itself current with a
// notification on the table's own channel, the one every follower of the
// table LISTENs to: PostgreSQL queues notifications in the order their
// transactions commit, one queue for every channel, so each follower
// receives the beat after the notifications of every transaction that
// committed before the beat's. One beat serves every follower of the
// table, whatever its prefix.
//
// The beat is dated by the server as it runs: its payload is
// "b<MICROS>:<SENDER>:<SEQ>", MICROS the server's clock_timestamp() in
// microseconds since the Unix epoch, read inside the statement that
// notifies, before it commits. Each receiver converts it to its own clock
// with a sample of the server's clock (SampleClock) as a lower bound, as
// the Redis adapter does with TIME: the sample read srv at a local instant
// after s0, so the server read MICROS no earlier than s0 + (MICROS − srv),
// less the drift allowed since the sample. Neither process's wall clock
// takes part; one sample converts beats for beatSampleEvery. A beat that
// converts to an instant after its own arrival cannot be a lower bound (a
// clock stepped, a forged payload): it is dropped, after one fresh sample.
// The sender dates its own beat by its own clock, the instant before it
// sent the statement.
//
// The trigger's payloads begin with 'k', '~' or '*', so a beat is never
// taken for a change, and a follower that beats on its own ignores it.
const beatPrefix = "b"

const (
	// beatSampleEvery is how long one clock sample converts beats.
	beatSampleEvery = 30 * time.Second
	// beatDriftPPM bounds how far two clocks drift apart, in parts per
	// million of the time since a sample: 500, the most NTP slews a clock.
	beatDriftPPM = 500
)

// sqlBeat notifies a beat dated by the server: $1 the channel, $2
// "SENDER:SEQ".
const sqlBeat = `SELECT pg_notify($1, 'b' || (extract(epoch FROM clock_timestamp()) * 1000000)::bigint || ':' || $2)`

// acceptFutureBeats, set by tests only, delivers a beat whatever instant
// it converts to: the negative control of the arrival check.
var acceptFutureBeats atomic.Bool

// beatCounts counts, over every feed of the process, the beats on demand
// sent, the clock samples and the beats dropped as dated after their
// arrival: what the feed cost model (internal/model) is held to against
// the server's own count.
var beatCounts struct{ sent, samples, rejected atomic.Int64 }

// drift is the drift allowed over d.
func drift(d time.Duration) time.Duration { return d / 1_000_000 * beatDriftPPM }

// demand is one session's beating on demand, on the session's goroutine.
type demand struct {
	f *follower
	// last is the At of the newest Synced delivered; jitter, drawn anew
	// with each, is how much longer than the heartbeat this feed lets it
	// age before it beats: followers asked at once beat one after
	// another, so the first one's beat arrives before the others send.
	last   time.Time
	jitter time.Duration
	// s0 is the local instant before the clock sample that answered srv;
	// srv is zero until the first.
	s0, srv time.Time
	// seq numbers the follower's beats; sent is when the one under way
	// was sent (zero: none is).
	seq  uint64
	sent time.Time
}

// setLast records the newest Synced and draws the next jitter, up to an
// eighth of the heartbeat.
func (d *demand) setLast(at time.Time) {
	d.last = at
	d.jitter = rand.N(d.f.heartbeat/8 + 1)
}

// due reports whether a beat is to be sent at now: none is under way and
// the newest Synced is older than the heartbeat and the jitter.
func (d *demand) due(now time.Time) bool {
	return d.sent.IsZero() && now.Sub(d.last) >= d.f.heartbeat+d.jitter
}

// payload starts a beat sent at now and returns its "SENDER:SEQ".
func (d *demand) start(now time.Time) string {
	d.seq++
	d.sent = now
	beatCounts.sent.Add(1)
	return d.f.id + ":" + strconv.FormatUint(d.seq, 10)
}

// overdue reports an error when the follower's own beat has not come back
// within lostAfter: the listening connection no longer receives.
func (d *demand) overdue(now time.Time) error {
	if !d.sent.IsZero() && now.Sub(d.sent) > d.f.lostAfter {
		return fmt.Errorf("the feed's own beat did not come back within %v", d.f.lostAfter)
	}
	return nil
}

// sample reads the server's clock when the last sample is too old, or
// when force is set.
func (d *demand) sample(ctx context.Context, force bool) error {
	if !force && !d.srv.IsZero() && time.Since(d.s0) < beatSampleEvery {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, d.f.s.o.callTimeout)
	defer cancel()
	// The connection first, then s0: a conversion is as loose as the span
	// between s0 and the reading, which a connection dialled for it (the
	// feed's own was taken out of the pool) would add to. One round trip
	// (the simple protocol: no statement to prepare) then bounds it.
	c, err := d.f.s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("sample the server's clock: %w", err)
	}
	defer c.Release()
	s0 := time.Now()
	var srv time.Time
	if err := c.QueryRow(ctx, sqlClock, pgx.QueryExecModeSimpleProtocol).Scan(&srv); err != nil {
		return fmt.Errorf("sample the server's clock: %w", err)
	}
	d.s0, d.srv = s0, srv
	beatCounts.samples.Add(1)
	return nil
}

// convert turns tb, the server's clock when a beat ran, into a lower bound
// of that instant by this process's clock (clock_timestamp() answers in
// microseconds).
func (d *demand) convert(tb, arrival time.Time) time.Time {
	return d.s0.Add(tb.Sub(d.srv) - time.Microsecond - drift(arrival.Sub(d.s0)))
}

// received handles a beat's payload (without beatPrefix) that arrived at
// arrival: at is the instant, by this process's clock, before which every
// commit has been delivered, and ok is set when it is newer than the last
// Synced.
func (d *demand) received(ctx context.Context, payload string, arrival time.Time) (at time.Time, ok bool, err error) {
	fields := strings.Split(payload, ":")
	if len(fields) != 3 {
		return time.Time{}, false, fmt.Errorf("a beat %q of an unknown form", beatPrefix+payload)
	}
	micros, err1 := strconv.ParseInt(fields[0], 10, 64)
	seq, err2 := strconv.ParseUint(fields[2], 10, 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, false, fmt.Errorf("a beat %q of an unknown form", beatPrefix+payload)
	}
	if fields[1] == d.f.id && seq == d.seq && !d.sent.IsZero() {
		// This follower's own: sent before its statement ran, by this
		// clock.
		at, d.sent = d.sent, time.Time{}
	} else {
		tb := time.UnixMicro(micros)
		if err := d.sample(ctx, false); err != nil {
			return time.Time{}, false, err
		}
		at = d.convert(tb, arrival)
		if at.After(arrival) && time.Since(d.s0) > d.f.s.o.callTimeout && !acceptFutureBeats.Load() {
			// Perhaps a clock stepped since the sample: once more.
			if err := d.sample(ctx, true); err != nil {
				return time.Time{}, false, err
			}
			at = d.convert(tb, arrival)
		}
		if at.After(arrival) && !acceptFutureBeats.Load() {
			beatCounts.rejected.Add(1)
			return time.Time{}, false, nil
		}
	}
	if !at.After(d.last) {
		return time.Time{}, false, nil
	}
	d.setLast(at)
	return at, true, nil
}

// errNilWant is FollowDemand's error for a nil want.
var errNilWant = errors.New("want is nil")
