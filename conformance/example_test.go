package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
)

// memHarness makes a fresh memory store for every case. Your harness makes
// your store over a fresh, empty keyspace (a unique prefix or table).
type memHarness struct{}

func (memHarness) MakeStore(context.Context) (driver.Store, error) { return memory.New(), nil }
func (memHarness) Close()                                          {}

// An adapter's test calls Run with a HarnessMaker; options tune the suite.
func ExampleRun() {
	// In your adapter's store_test.go:
	_ = func(t *testing.T) {
		conformance.Run(t, func(ctx context.Context, t *testing.T) (conformance.Harness, error) {
			return memHarness{}, nil
		}, conformance.WithIterations(100))
	}
}

// Check needs no *testing.T. Every problem it returns wraps the promise it
// breaks, so errors.Is tells which.
func ExampleCheck() {
	err := conformance.Check(context.Background(), memHarness{}, conformance.WithSkipSlow(true))
	fmt.Println("violations:", err)
	fmt.Println("expired entries absent for CompareAndSwap broken:", errors.Is(err, conformance.PromiseExpiredCAS))
	// Output:
	// violations: <nil>
	// expired entries absent for CompareAndSwap broken: false
}

// Measure runs the same cases and reports each one by its stable ID;
// WithSkipSlow leaves out those that wait for real expiry.
func ExampleMeasure() {
	rep, err := conformance.Measure(context.Background(), memHarness{}, conformance.WithSkipSlow(true))
	fmt.Println("violations:", err)
	passed, skipped, notPromised := 0, 0, 0
	for _, r := range rep.Results {
		switch {
		case r.Passed():
			passed++
		case r.NotPromised:
			notPromised++ // memory shows no clock (driver.ClockSampler)
		case r.Skipped != "":
			skipped++
		}
		if r.Kind == conformance.KindDeclaration {
			fmt.Println(r.Case, "checks the declaration, not the store")
		}
	}
	fmt.Println("passed:", passed, "skipped:", skipped, "not promised:", notPromised)
	fmt.Println("TTLMargin for 1s of clock skew:", rep.TTLMarginFor(time.Second))
	// Output:
	// violations: <nil>
	// margin-keeps-probes checks the declaration, not the store
	// passed: 27 skipped: 3 not promised: 1
	// TTLMargin for 1s of clock skew: 2.001s
}

// deafHarness makes stores whose Get ignores an ended context.
type deafHarness struct{}

type deafGetStore struct{ *memory.Store }

func (s deafGetStore) Get(_ context.Context, key string) ([]byte, driver.Version, error) {
	return s.Store.Get(context.Background(), key)
}

func (deafHarness) MakeStore(context.Context) (driver.Store, error) {
	return deafGetStore{memory.New()}, nil
}
func (deafHarness) Close() {}

// A broken store's problems name the case and the promise: match them with
// errors.Is, read them with errors.As.
func ExampleProblem() {
	rep, err := conformance.Measure(context.Background(), deafHarness{}, conformance.WithSkipSlow(true))
	fmt.Println("context promise broken:", errors.Is(err, conformance.PromiseContextEnded))
	for _, r := range rep.Results {
		for _, p := range r.Problems {
			if pr, ok := errors.AsType[*conformance.Problem](p); ok {
				fmt.Printf("case %s broke %s: %s\n", pr.Case, string(pr.Promise), pr.Detail)
			}
		}
	}
	// Output:
	// context promise broken: true
	// case context-ended broke context-ended: Get with a canceled context = kvbreaker: not found, want an error matching context canceled
	// case context-ended broke context-ended: Get with a past deadline context = kvbreaker: not found, want an error matching context deadline exceeded
}
