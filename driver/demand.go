package driver

import (
	"context"
	"time"
)

// DemandFollower is an optional Follower interface: a feed that proves
// itself current only when its caller needs it to, through the store, so
// that one proof serves every follower of the store at once.
//
// FollowDemand is Follow (the same changes, Lost and resync, the same
// promise of each Synced's At, by the follower's own clock) but for when it
// beats: after a snapshot's Synced it sends no request of its own to prove
// itself current until want receives; then, when its newest Synced is older
// than heartbeat and no beat of its own is under way, it sends one (a
// wrapper that may hold a store without it, as kvbreaker.Prefixed does,
// beats as Follow does over such a store). A beat
// travels through the store to every follower of it, and each delivers a
// Synced for it (the store's clock, converted to the follower's with an
// offset the follower samples, dates it), so a fleet whose members all need
// freshness sends about one beat per heartbeat in all, and one with nothing
// to decide sends none. A beat whose time cannot be a lower bound of its
// commit by the follower's clock (it lies after its own arrival) is
// dropped, not delivered. A store whose answers carry no clock to convert
// a beat's time with (etcd) beats for its own follower alone, but still
// only when want asks: a fleet with nothing to decide sends none.
type DemandFollower interface {
	FollowDemand(ctx context.Context, prefix string, heartbeat time.Duration, want <-chan struct{}, fn func(Change)) error
}
