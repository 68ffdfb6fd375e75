package adapter

import (
	"context"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// Backoff is the wait between a feed's attempts to resynchronise while the
// store refuses them: Min first, doubling after each wait up to Max, Min
// again after Reset (a session that synced). Without the doubling a fleet
// would hammer a store that is coming back; without Reset one long outage
// would slow every later recovery. Its zero value waits not at all.
type Backoff struct {
	Min, Max time.Duration
	next     time.Duration
}

// Reset makes the next Wait the shortest again.
func (b *Backoff) Reset() { b.next = 0 }

// Wait waits the current back-off and doubles the next one; it returns
// ctx's error, at once, when ctx ends first.
func (b *Backoff) Wait(ctx context.Context) error {
	if b.next == 0 {
		b.next = b.Min
	}
	t := time.NewTimer(b.next)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	b.next = min(2*b.next, b.Max)
	return nil
}

// Resync is a Follow that runs sessions one after another (a snapshot, then
// the changes after it) until ctx ends or the store will not be followed:
// after a session that delivered a Reset comes a Lost, so that the caller
// stops deciding on what it delivered, then a wait of Backoff and a new
// session. Backoff resets after each session that delivered a snapshot
// whole.
type Resync struct {
	// Backoff is the wait between sessions; its zero value waits from
	// 10 ms, doubling, up to 1 s: a store that restarts is followed again
	// within a second of coming back, and a fleet of followers sends it
	// no more than one attempt a second each while it refuses.
	Backoff Backoff
	// Gate is the adapter's: Follow checks the call with it, and a store
	// closed during the feed ends Run with Gate's closed error.
	Gate Gate
	// Session follows once, until it fails or ctx ends: began says it
	// delivered a Reset, synced that it delivered a snapshot whole, err
	// why it ended.
	Session func(ctx context.Context) (began, synced bool, err error)
	// Refused says err means the store will not let this client follow
	// at all, as opposed to not now. Follow returns Wrap's error of it
	// when the first sessions are refused before any began or synced;
	// once one has, a refusal is a Lost and a resynchronisation like any
	// other failure (the permission may come back).
	Refused func(err error) bool
	// Wrap makes a session's error Follow's (or a Lost's): the adapter's
	// *driver.OpError, with op "follow" and the prefix for key.
	Wrap func(op, key string, err error) error
}

// Follow is the adapter's Follow (demand false, want nil) or FollowDemand
// (demand true): it checks the call (Gate.Follow, then ctx, whose error it
// returns as it is), then follows until ctx ends (its error), the store is
// closed (Gate's closed error) or refuses the first sessions (Wrap of the
// refusal). fn receives the Lost changes; the sessions deliver the rest.
func (r *Resync) Follow(ctx context.Context, prefix string, heartbeat time.Duration, demand bool, want <-chan struct{}, fn func(driver.Change)) error {
	if err := r.Gate.Follow(prefix, heartbeat, demand, want, fn); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.Backoff == (Backoff{}) {
		r.Backoff = Backoff{Min: 10 * time.Millisecond, Max: time.Second}
	}
	synced := false // a snapshot was delivered whole, once
	for {
		began, ok, err := r.Session(ctx)
		synced = synced || ok
		if ok {
			r.Backoff.Reset()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if r.Gate.Closed() {
			return r.Gate.Wrap(OpFollow, prefix, r.Gate.ErrClosed)
		}
		if !synced && !began && r.Refused(err) {
			return r.Wrap(OpFollow, prefix, err)
		}
		if began {
			// A snapshot, perhaps part of one, or the changes after it,
			// was delivered: the caller must not decide on it any more.
			fn(driver.Change{Kind: driver.ChangeLost, Err: r.Wrap(OpFollow, prefix, err)})
		}
		if err := r.Backoff.Wait(ctx); err != nil {
			return err
		}
	}
}
