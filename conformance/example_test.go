package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

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
// breaks, so errors.Is tells which; a promise a Breaker relies on that the
// harness gave the suite no way to verify (memHarness plants no foreign
// data: it is no ForeignPlanter) fails it too, matching ErrNotVerified,
// until the harness waives it, with its reason.
func ExampleCheck() {
	ctx := context.Background()
	err := conformance.Check(ctx, memHarness{}, conformance.WithSkipSlow(true))
	fmt.Println("expired entries absent for CompareAndSwap broken:", errors.Is(err, conformance.PromiseExpiredCAS))
	fmt.Println("not verified:", errors.Is(err, conformance.ErrNotVerified))
	err = conformance.Check(ctx, memHarness{}, conformance.WithSkipSlow(true),
		conformance.Waive(conformance.PromiseForeign, "an in-process store holds only what this process's Breakers wrote"))
	fmt.Println("with the waiver:", err)
	// Output:
	// expired entries absent for CompareAndSwap broken: false
	// not verified: true
	// with the waiver: <nil>
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
	err := conformance.Check(context.Background(), deafHarness{}, conformance.WithSkipSlow(true),
		conformance.Waive(conformance.PromiseForeign, "an in-process store holds only what this process's Breakers wrote"))
	fmt.Println("context promise broken:", errors.Is(err, conformance.PromiseContextEnded))
	if pr, ok := errors.AsType[*conformance.Problem](err); ok {
		fmt.Printf("case %s broke %s: %s\n", pr.Case, string(pr.Promise), pr.Detail)
	}
	// Output:
	// context promise broken: true
	// case context-ended broke context-ended: Get with a canceled context = kvbreaker: not found, want an error matching context canceled
}
