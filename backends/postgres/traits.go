package postgres

import (
	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// DefaultTraits is what every Store declares (adapter.RowTraits): atomic
// conditional writes; relative expiry on the server's clock (expires_at =
// now() + ttl, rounded up to the microseconds of timestamptz, judged
// against now() by every read and condition), never early nor late on that
// clock; reads on the primary are never stale. The record's own instants
// are in the writers' clocks, so the fleet's skew counts twice in the
// margin (driver.ExpiryRelative).
func DefaultTraits() driver.Traits { return adapter.RowTraits() }
