package adapter

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// DemandBeats is the bookkeeping of a feed that beats on demand
// (driver.DemandFollower) with a message every follower of the store
// receives after the changes committed before it, dated by the store's
// clock (PostgreSQL's pg_notify, Redis's PUBLISH): the newest Synced the
// feed delivered, how much longer than its heartbeat it lets that age
// before it beats, its own beat under way, and the dating of a beat that
// arrives, its own by the instant it was sent, another's by Clock.
//
// Set Clock and Heartbeat (Dropped and KeepLate as needed); the rest
// starts empty. A DemandBeats is not safe for concurrent use: a feed keeps
// one on the goroutine that receives its beats.
type DemandBeats struct {
	// Clock dates the beats of other followers (BeatClock.Date).
	Clock BeatClock
	// Heartbeat is how old the newest Synced may grow, plus a jitter of
	// up to an eighth of it, before the feed beats when asked.
	Heartbeat time.Duration
	// Dropped, when set, counts the beats Other dropped as late, over
	// every feed that shares it (a package's count of what its feeds
	// cost).
	Dropped *atomic.Int64
	// KeepLate, when set and true, keeps a late beat instead: a package's
	// tests' negative control of that check.
	KeepLate *atomic.Bool

	last   time.Time
	jitter time.Duration
	seq    uint64
	sent   time.Time
}

// Last is the At of the newest Synced recorded (Synced).
func (b *DemandBeats) Last() time.Time { return b.last }

// Synced records at, a Synced the feed delivers, when it is newer than the
// newest recorded, and draws the next jitter: followers asked at once beat
// one after another, so the first one's beat arrives before the others
// send theirs. It reports whether at was newer.
func (b *DemandBeats) Synced(at time.Time) bool {
	if !at.After(b.last) {
		return false
	}
	b.last = at
	b.jitter = rand.N(b.Heartbeat/8 + 1)
	return true
}

// Due reports whether the feed beats at now: no beat of its own is under
// way and the newest Synced is at least the heartbeat and the jitter old.
func (b *DemandBeats) Due(now time.Time) bool {
	return b.sent.IsZero() && now.Sub(b.last) >= b.Heartbeat+b.jitter
}

// Next numbers the feed's next beat, for its payload.
func (b *DemandBeats) Next() uint64 {
	b.seq++
	return b.seq
}

// Sent records that the beat Next numbered is under way since at, the
// local instant before the store ran it: the instant it dates the feed's
// Synced by when it comes back.
func (b *DemandBeats) Sent(at time.Time) { b.sent = at }

// Overdue reports whether the feed's own beat under way has not come back
// within d at now: the feed no longer receives.
func (b *DemandBeats) Overdue(now time.Time, d time.Duration) bool {
	return !b.sent.IsZero() && now.Sub(b.sent) > d
}

// Own reports whether a beat the feed itself sent (the caller matched the
// sender) numbered seq is the one under way, and takes it: sent is the
// instant Sent recorded, and no beat is under way after it.
func (b *DemandBeats) Own(seq uint64) (sent time.Time, ok bool) {
	if seq != b.seq || b.sent.IsZero() {
		return time.Time{}, false
	}
	sent, b.sent = b.sent, time.Time{}
	return sent, true
}

// Other dates another follower's beat that carries tb, the store's clock
// when it ran, and arrived at arrival (BeatClock.Date). A beat that still
// converts to an instant after its arrival is dropped (counted in
// Dropped) unless KeepLate. ok reports a Synced to deliver at at: a beat
// kept and newer than the newest Synced, which it becomes.
func (b *DemandBeats) Other(ctx context.Context, tb, arrival time.Time) (at time.Time, ok bool, err error) {
	at, late, err := b.Clock.Date(ctx, tb, arrival)
	if err != nil {
		return time.Time{}, false, err
	}
	if late && (b.KeepLate == nil || !b.KeepLate.Load()) {
		if b.Dropped != nil {
			b.Dropped.Add(1)
		}
		return time.Time{}, false, nil
	}
	if !b.Synced(at) {
		return time.Time{}, false, nil
	}
	return at, true, nil
}
