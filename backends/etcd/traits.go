package etcd

import (
	"time"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// DefaultServerMinTTL is the shortest lease an etcd server grants with its
// default election timeout (1 s): ceil(1.5 × 1 s). A Store learns the
// server's own minimum at New, or takes it from WithMinTTL.
const DefaultServerMinTTL = 2 * time.Second

// DefaultTraits is what a Store declares with default options over a server
// granting DefaultServerMinTTL: atomic compares; relative expiry in whole
// seconds rounded up; a key may outlive its TTL by the leader's
// CheckInterval plus the longest a pooled lease outlives it
// (DefaultMaxReuse). Package skew's Etcd profile equals it (checked by this
// package's tests).
func DefaultTraits() driver.Traits {
	return traits(DefaultServerMinTTL, DefaultMaxReuse.Truncate(time.Second))
}

// traits is what a Store declares over a server granting leases of minTTL
// at least, whose pooled leases outlive their keys by up to slack
// (Traits).
func traits(minTTL, slack time.Duration) driver.Traits {
	return adapter.ServerExpiry{Granularity: time.Second, MinTTL: minTTL, Late: CheckInterval + slack}.Traits()
}
