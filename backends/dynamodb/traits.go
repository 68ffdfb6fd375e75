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
func DefaultTraits() driver.Traits {
	return driver.Traits{
		Atomic: true,
		Expiry: driver.ExpiryModel{
			Kind:        driver.ExpiryReaderFiltered,
			Granularity: time.Second,
			Late:        time.Second,
		},
		MaxClockSkew:       DefaultPurgeDelay,
		MaxClockSkewOption: "dynamodb.WithPurgeDelay",
	}
}
