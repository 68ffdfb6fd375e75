package dynamodb

import (
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// DefaultTraits is what a Store declares with default options: atomic
// conditional writes; an expiry instant in whole epoch seconds (rounded up)
// filtered by the reader's clock, so an entry may read as present up to a
// second past its TTL; consistent reads; and a physical copy purged
// DefaultPurgeDelay after the logical expiry, which bounds the fleet's clock
// skew. Package skew's DynamoDB profile equals it (checked by this
// package's tests).
func DefaultTraits() driver.Traits { return traits(DefaultPurgeDelay) }

// traits is what a Store with a purge delay of purge declares (Traits).
func traits(purge time.Duration) driver.Traits {
	return driver.Traits{
		MaxClockSkew:       purge,
		MaxClockSkewOption: "dynamodb.WithPurgeDelay",
		Atomic:             true,
		Expiry: driver.ExpiryModel{
			Kind:        driver.ExpiryReaderFiltered,
			Granularity: time.Second,
			// Rounding the expiry instant up keeps an entry readable for
			// [ttl, ttl+1s) after its write, by the reader's clock.
			Early: 0,
			Late:  time.Second,
		},
	}
}
