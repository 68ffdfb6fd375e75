package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/core"
)

// Harness makes stores for the suite. Implement it in your adapter's
// _test.go and pass a HarnessMaker to Run.
type Harness interface {
	// MakeStore returns a store over a fresh, empty keyspace (a unique key
	// prefix or table). The suite calls it once per subtest, so no case
	// sees another's leftovers.
	MakeStore(ctx context.Context) (core.Store, error)
	// Close releases what the harness holds; the suite calls it once, at
	// the end.
	Close()
}

// HarnessMaker is called once per Run.
type HarnessMaker func(ctx context.Context, t *testing.T) (Harness, error)

// TimeAdvancer is an optional Harness capability for backends whose clock
// the test controls (Miniflare): Advance moves the backend's clock forward,
// so expiry can be measured without waiting in real time.
type TimeAdvancer interface {
	Advance(ctx context.Context, d time.Duration) error
}
