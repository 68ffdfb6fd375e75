package adapter

import (
	"context"
	"errors"
	"time"
)

// BeatClock dates a feed's beats (driver.DemandFollower) by the follower's
// own clock from the store's: a beat carries the store's clock when it ran,
// and a sample of that clock, read by one round trip, converts it to a
// lower bound of that instant by the follower's clock. Neither the sender's
// nor the follower's wall clock is compared with the store's: only the
// follower's own clock over the time since its sample, and the store's
// reading in between.
//
// The sample read server at a local instant after before (the request was
// sent after it), so the store's clock read a beat's time tb no earlier
// than before + (tb − server), less the store's clock's unit (server was
// truncated to it) and less the drift allowed between the two readings
// (DriftPPM of |tb − server|, whichever came first: a beat that arrived
// before the sample was taken is converted as surely as one after). A beat that converts to an instant after its own
// arrival cannot be a lower bound: a clock stepped since the sample, or
// the beat's time is wrong (a forged or mistaken payload). Date samples
// once more then, and reports the beat late if it still is: the caller
// drops it.
//
// The zero BeatClock is not usable: Sample, Every and Unit must be set.
// A BeatClock is not safe for concurrent use; a feed keeps one on the
// goroutine that receives its beats.
type BeatClock struct {
	// Sample reads the store's clock in one round trip: before is the
	// local instant before the request was sent, after the instant its
	// answer arrived, server the store's reading. It is called with
	// Date's context.
	Sample func(ctx context.Context) (before, server, after time.Time, err error)
	// Every is how long one sample converts beats before Date takes
	// another.
	Every time.Duration
	// Fresh: a conversion that lands after its beat's arrival is sampled
	// again only when the sample is older than this (the store call's
	// timeout: a younger one cannot have missed a step of the clock).
	Fresh time.Duration
	// DriftPPM bounds how far the two clocks drift apart, in parts per
	// million of the time since the sample (500: the most NTP slews a
	// clock).
	DriftPPM int64
	// Unit is the resolution of the store's clock readings (a
	// microsecond for PostgreSQL's clock_timestamp() and Redis's TIME).
	Unit time.Duration

	before, after, server time.Time
	samples               int
}

// errNoSample is Date's error for a BeatClock without Sample.
var errNoSample = errors.New("adapter: BeatClock.Sample is nil: set the function that reads the store's clock")

// Samples is how many samples the clock has taken.
func (c *BeatClock) Samples() int { return c.samples }

// Drift is the drift allowed over a span d, either way, rounded up.
func (c *BeatClock) Drift(d time.Duration) time.Duration {
	if d < 0 {
		d = -d
	}
	return (d*time.Duration(c.DriftPPM) + 999_999) / 1_000_000
}

// Refresh takes a sample when there is none, when the last is Every old
// at now, or when force is set.
func (c *BeatClock) Refresh(ctx context.Context, now time.Time, force bool) error {
	if !force && !c.server.IsZero() && now.Sub(c.before) < c.Every {
		return nil
	}
	if c.Sample == nil {
		return errNoSample
	}
	before, server, after, err := c.Sample(ctx)
	if err != nil {
		return err
	}
	c.before, c.server, c.after = before, server, after
	c.samples++
	return nil
}

// Observe takes a reading of the store's clock made another way as the
// sample, when it is newer than the one held: the store read server
// between the local instants before and after. A beat of the follower's
// own that carries the store's clock as its statement ran is one (sent
// after before, back at after): a follower that sends beats needs no
// sample of its own while it does.
func (c *BeatClock) Observe(before, server, after time.Time) {
	if !c.server.IsZero() && !before.After(c.before) {
		return
	}
	c.before, c.server, c.after = before, server, after
}

// ServerAt is a lower bound of the store's clock at now, the local
// instant: its reading moved on by the local time since the answer, less
// the drift allowed since the sample. It is what a sender that dates its
// own beat by the store's clock puts in it. Refresh first.
func (c *BeatClock) ServerAt(now time.Time) time.Time {
	return c.server.Add(now.Sub(c.after) - c.Drift(now.Sub(c.before)))
}

// Convert turns tb, the store's clock when a beat ran (or a lower bound
// of it), into a lower bound of that instant by the local clock. Refresh
// first.
func (c *BeatClock) Convert(tb time.Time) time.Time {
	d := tb.Sub(c.server)
	return c.before.Add(d - c.Unit - c.Drift(d))
}

// Date converts tb, a beat that arrived at arrival, sampling first when
// the sample is too old (Refresh), and once more when the conversion lands
// after arrival and the sample is older than Fresh. late reports that it
// still lands after arrival: the caller drops the beat (at is returned for
// its diagnosis only).
func (c *BeatClock) Date(ctx context.Context, tb, arrival time.Time) (at time.Time, late bool, err error) {
	if err := c.Refresh(ctx, arrival, false); err != nil {
		return time.Time{}, false, err
	}
	at = c.Convert(tb)
	if at.After(arrival) && arrival.Sub(c.before) > c.Fresh {
		if err := c.Refresh(ctx, arrival, true); err != nil {
			return time.Time{}, false, err
		}
		at = c.Convert(tb)
	}
	return at, at.After(arrival), nil
}
