package mysql

import (
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// DefaultTraits is what every Store declares: atomic conditional writes;
// relative expiry on the server's clock (expires_at = UTC_TIMESTAMP(6) +
// ttl, rounded up to the microseconds of DATETIME(6), judged against
// UTC_TIMESTAMP(6) by every read and condition), never early nor late on
// that clock; reads on the primary are never stale. The record's own
// instants are in the writers' clocks, so the fleet's skew counts twice in
// the margin (driver.ExpiryRelative).
func DefaultTraits() driver.Traits {
	return driver.Traits{
		Atomic: true,
		Expiry: driver.ExpiryModel{
			Kind:        driver.ExpiryRelative,
			Granularity: time.Microsecond,
		},
	}
}
