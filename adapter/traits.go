package adapter

import (
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// ServerExpiry is the expiry of a store whose conditional writes are
// atomic and whose server expires each key by its own clock
// (driver.ExpiryRelative: it counts the TTL down, or stores its own now
// plus the TTL and compares that with its own now): etcd, NATS, Redis,
// MySQL and PostgreSQL. Such stores differ only in these durations, the
// driver.ExpiryModel fields of the same names, so each declares them once
// here, by name, and Traits builds the rest.
type ServerExpiry struct {
	// Granularity is the unit the server rounds a TTL up to (zero: exact).
	Granularity time.Duration
	// MinTTL is the shortest TTL the server grants.
	MinTTL time.Duration
	// Late is how long after its TTL the server's expiry may act.
	Late time.Duration
}

// Traits is what a store of this expiry declares: atomic compares;
// relative expiry rounded up to Granularity, at least MinTTL, never early,
// late by up to Late; reads that are never stale (a store that reads from
// replicas sets ReadStaleness on the result).
func (e ServerExpiry) Traits() driver.Traits {
	return driver.Traits{
		Atomic: true,
		Expiry: driver.ExpiryModel{
			Kind:        driver.ExpiryRelative,
			Granularity: e.Granularity,
			MinTTL:      e.MinTTL,
			Late:        e.Late,
		},
	}
}

// RowTraits is what a store declares that keeps each key's expiry in a row
// as the SQL server's clock plus the TTL, in the microseconds of its
// timestamp type, and compares it with that clock in every read and
// condition (MySQL, PostgreSQL; RowExpiry is such a row's time left):
// atomic compares, relative expiry in microseconds rounded up, never early
// nor late on the server's clock.
func RowTraits() driver.Traits { return ServerExpiry{Granularity: time.Microsecond}.Traits() }
