package cloudflarekv

import (
	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
)

// DefaultTraits is what a Store declares with default options: last writer
// wins; the exact expiry (to the millisecond) kept in metadata and filtered
// by the reader's clock, with a physical copy of at least MinTTL padded by
// twice the clock-skew bound (kvbreaker's default ClockSkew) plus a second,
// rounded up to whole seconds; reads up to Propagation plus the cache's
// DefaultCacheFreshness stale; one write per DefaultWriteInterval per key.
// Package skew's WorkersKV profile equals it (checked by this package's
// tests).
func DefaultTraits() driver.Traits {
	return traits(kvbreaker.Settings{}.WithDefaults().ClockSkew, DefaultCacheFreshness, DefaultWriteInterval)
}
