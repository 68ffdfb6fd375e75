package adapter

import (
	"errors"
	"fmt"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// FollowArgs checks driver.Follower.Follow's arguments the way every
// adapter should, before it contacts the store: a heartbeat that is not
// positive, or a nil fn, is refused with an error that says what to pass
// (the adapter wraps it in its *driver.OpError). The conformance case
// follow-arguments holds a Follow to it.
func FollowArgs(heartbeat time.Duration, fn func(driver.Change)) error {
	var errs []error
	if heartbeat <= 0 {
		errs = append(errs, fmt.Errorf("heartbeat %v is not positive: pass how often Synced must arrive while nothing changes", heartbeat))
	}
	if fn == nil {
		errs = append(errs, errors.New("fn is nil: pass the function that receives the changes"))
	}
	return errors.Join(errs...)
}

// ListArgs checks driver.Lister.List's limit the way every adapter should,
// before it contacts the store: a limit that is not positive is refused
// with an error that says what to pass (the adapter wraps it in its
// *driver.OpError).
func ListArgs(limit int) error {
	if limit <= 0 {
		return fmt.Errorf("limit %d is not positive: pass the most keys a page may hold", limit)
	}
	return nil
}

// Feed is one Follow or FollowDemand call as the sessions of a feed see it
// (etcd, NATS, whose Resync.Follow takes the call's arguments from it):
// what was asked, and the newest Synced delivered, by which a feed on
// demand judges whether a beat is wanted.
type Feed struct {
	Prefix    string
	Heartbeat time.Duration
	// Demand is set for FollowDemand, whose Want asks for a beat; a Follow
	// beats every Heartbeat and has no Want.
	Demand bool
	Want   <-chan struct{}
	Fn     func(driver.Change)

	last time.Time
}

// minFeedCallTimeout is the least CallTimeout: a snapshot page or a
// consumer's creation on a loaded server takes seconds, whatever the
// heartbeat.
const minFeedCallTimeout = 5 * time.Second

// CallTimeout bounds one of the feed's requests to the store (a page of
// its snapshot, the creation of its consumer): four heartbeats, at least
// 5 s.
func (f *Feed) CallTimeout() time.Duration { return max(minFeedCallTimeout, 4*f.Heartbeat) }

// Synced delivers Synced{At: at} and records at as the newest Synced.
func (f *Feed) Synced(at time.Time) {
	f.last = at
	f.Fn(driver.Change{Kind: driver.ChangeSynced, At: at})
}

// Last is the At of the newest Synced delivered (zero: none yet).
func (f *Feed) Last() time.Time { return f.last }

// Due reports whether a beat asked for at now is wanted: the newest Synced
// is at least Heartbeat old, and no beat the feed sent within Heartbeat
// still waits for its changes (waiting: one does, the newest sent at
// newest; PendingBeats.Newest).
func (f *Feed) Due(now, newest time.Time, waiting bool) bool {
	return now.Sub(f.last) >= f.Heartbeat && (!waiting || now.Sub(newest) >= f.Heartbeat)
}
