package adapter

import (
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// CeilSeconds is d in whole seconds, rounded up, and at least 1: the TTL
// to ask of a store that counts expiry in whole seconds (etcd's leases,
// NATS's per-message TTL), so that a key never expires before d. Rounding
// down would expire it early; a TTL of 0 means "none" to such stores.
func CeilSeconds(d time.Duration) int64 {
	sec := int64(d / time.Second)
	if d%time.Second != 0 {
		sec++
	}
	return max(1, sec)
}

// RowExpiry is driver.ExpiryReader.Expiry's answer for a row whose time
// left the store computed in microseconds by its own clock (MySQL,
// PostgreSQL): a negative count is a row that never expires (an expiry
// instant only another program writes, 'infinity' or 9999-12-31), which
// the contract reports as driver.NoExpiry.
func RowExpiry(micros int64) time.Duration {
	if micros < 0 {
		return driver.NoExpiry
	}
	return time.Duration(micros) * time.Microsecond
}
