package conformance_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
)

// memHarness makes a fresh memory store for every case.
type memHarness struct{}

func (memHarness) MakeStore(context.Context) (driver.Store, error) { return memory.New(), nil }
func (memHarness) Close()                                          {}

// An adapter's test calls Run with a HarnessMaker.
func ExampleRun() {
	// In your adapter's store_test.go:
	_ = func(t *testing.T) {
		conformance.Run(t, func(ctx context.Context, t *testing.T) (conformance.Harness, error) {
			return memHarness{}, nil
		})
	}
}

// Measure runs the same cases without a *testing.T and reports each one;
// SkipSlow leaves out those that wait for real expiry.
func ExampleMeasure() {
	rep, err := conformance.Measure(context.Background(), memHarness{}, conformance.WithSkipSlow(true))
	fmt.Println("violations:", err)
	passed, skipped := 0, 0
	for _, r := range rep.Results {
		switch {
		case r.Passed():
			passed++
		case r.Skipped != "":
			skipped++
		}
	}
	fmt.Println("passed:", passed, "skipped:", skipped)
	// Output:
	// violations: <nil>
	// passed: 24 skipped: 2
}
