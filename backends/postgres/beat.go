package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kvbreaker/kvbreaker/adapter"
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
// notifies, before it commits. Each receiver converts it to a lower bound
// by its own clock with a sample of the server's clock (SELECT
// clock_timestamp()), as the Redis adapter does with TIME, through
// adapter.BeatClock: neither process's wall clock takes part; one sample
// converts beats for beatSampleEvery. A beat that converts to an instant
// after its own arrival cannot be a lower bound (a clock stepped, a forged
// payload): it is dropped, after one fresh sample.
// The sender dates its own beat by its own clock, the instant before it
// sent the statement; the beat's MICROS, read between that instant and
// its arrival, then serves the sender as a sample (BeatClock.Observe), so
// a follower samples only when it has sent no beat for beatSampleEvery.
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

// ignoreOwnBeatSamples, set by tests only, takes no sample from a beat of
// the follower's own: the negative control of the samples it spares.
var ignoreOwnBeatSamples atomic.Bool

// dateOwnBeatsAtArrival, set by tests only, dates a follower's own beat at
// its arrival, after its commit: the negative control of its dating
// before the statement was sent.
var dateOwnBeatsAtArrival atomic.Bool

// beatCounts counts, over every feed of the process, the beats on demand
// sent, the clock samples and the beats dropped as dated after their
// arrival: what the feed cost model (internal/model) is held to against
// the server's own count.
var beatCounts struct{ sent, samples, rejected atomic.Int64 }

// demand is one session's beating on demand, on the session's goroutine:
// its newest Synced, its own beat under way and the dating of others'
// (adapter.DemandBeats; Clock samples the server's clock for
// beatSampleEvery).
type demand struct {
	f *follower
	adapter.DemandBeats
}

// newDemand starts a session's beating on demand, its newest Synced the
// session's first.
func newDemand(f *follower) *demand {
	d := &demand{f: f}
	d.Heartbeat = f.heartbeat
	d.Dropped, d.KeepLate = &beatCounts.rejected, &acceptFutureBeats
	d.Clock = adapter.BeatClock{Sample: d.sample, Every: beatSampleEvery, Fresh: f.s.o.callTimeout,
		DriftPPM: beatDriftPPM, Unit: time.Microsecond}
	d.Synced(f.syncedAt)
	return d
}

// start starts a beat sent at now and returns its "SENDER:SEQ".
func (d *demand) start(now time.Time) string {
	seq := d.Next()
	d.Sent(now)
	beatCounts.sent.Add(1)
	return d.f.id + ":" + strconv.FormatUint(seq, 10)
}

// overdue reports an error when the follower's own beat has not come back
// within lostAfter: the listening connection no longer receives.
func (d *demand) overdue(now time.Time) error {
	if d.Overdue(now, d.f.lostAfter) {
		return fmt.Errorf("the feed's own beat did not come back within %v", d.f.lostAfter)
	}
	return nil
}

// sample reads the server's clock (adapter.BeatClock.Sample).
func (d *demand) sample(ctx context.Context) (before, srv, after time.Time, err error) {
	ctx, cancel := context.WithTimeout(ctx, d.f.s.o.callTimeout)
	defer cancel()
	// The connection first, then before: a conversion is as loose as the
	// span between before and the reading, which a connection dialled
	// for it (the feed's own was taken out of the pool) would add to. One
	// round trip (the simple protocol: no statement to prepare) then
	// bounds it.
	c, err := d.f.s.pool.Acquire(ctx)
	if err != nil {
		return before, srv, after, fmt.Errorf("sample the server's clock: %w", err)
	}
	defer c.Release()
	before = time.Now()
	if err := c.QueryRow(ctx, sqlClock, pgx.QueryExecModeSimpleProtocol).Scan(&srv); err != nil {
		return before, srv, after, fmt.Errorf("sample the server's clock: %w", err)
	}
	beatCounts.samples.Add(1)
	return before, srv, time.Now(), nil
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
	tb := time.UnixMicro(micros)
	if fields[1] == d.f.id {
		if sent, own := d.Own(seq); own {
			// This follower's own: sent before its statement ran, by
			// this clock. Its statement read the server's clock (MICROS)
			// after that and before the arrival: a sample, which spares
			// the follower one of its own while it sends beats.
			if !ignoreOwnBeatSamples.Load() {
				d.Clock.Observe(sent, tb, arrival)
			}
			if dateOwnBeatsAtArrival.Load() {
				sent = arrival
			}
			return sent, d.Synced(sent), nil
		}
	}
	return d.Other(ctx, tb, arrival)
}
