package memory_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

// planter gives the memory harnesses the conformance suite's ForeignPlanter
// and LifetimeReporter capabilities. Memory holds bytes, so the foreign
// shapes are byte strings no Breaker writes, planted with the longest TTL
// (memory has no write without one, and that TTL never expires).
type planter struct{}

// foreignShapes are what another process (or an older or newer version, or
// a write cut short) may leave at a Breaker's key.
var foreignShapes = func() map[string][]byte {
	open := record.EncodeRecord(record.Record{
		Failures:        []time.Time{time.Unix(1e9, 0), time.Unix(1e9+1, 0)},
		RestrainedUntil: time.Unix(1e9+60, 0),
	})
	future := bytes.Clone(open)
	future[0] = 0xee // a format version no release writes
	return map[string][]byte{
		"empty":                  {},
		"garbage":                []byte("\xff\xfe not a record \x00\x01"),
		"1 MB":                   bytes.Repeat([]byte{0xa5}, 1<<20),
		"unknown format version": future,
		"truncated record":       open[:len(open)-3],
		"JSON, no record":        []byte(`{"state":"open","failures":5,"until":"2030-01-01T00:00:00Z"}`),
	}
}()

func (planter) ForeignShapes() []string {
	return []string{"empty", "garbage", "1 MB", "unknown format version", "truncated record", "JSON, no record"}
}

// PlantForeign writes the shape's bytes over whatever is at key, with the
// store's own compare-and-swap (for memory, the adapter is the client).
func (planter) PlantForeign(ctx context.Context, s driver.Store, key, shape string) error {
	b, ok := foreignShapes[shape]
	if !ok {
		return fmt.Errorf("unknown shape %q", shape)
	}
	for range 100 {
		_, v, err := s.Get(ctx, key)
		if err != nil && !errors.Is(err, driver.ErrNotFound) {
			return err
		}
		_, err = s.CompareAndSwap(ctx, key, v, b, math.MaxInt64)
		if !errors.Is(err, driver.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("planting %q at %q: 100 conflicts", shape, key)
}

// Lifetime reads memory's own expiry (driver.ExpiryReader).
func (planter) Lifetime(ctx context.Context, s driver.Store, key string) (time.Duration, error) {
	er, ok := s.(driver.ExpiryReader)
	if !ok {
		return 0, fmt.Errorf("%T is no driver.ExpiryReader", s)
	}
	return er.Expiry(ctx, key)
}
