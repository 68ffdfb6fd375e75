package conformance_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
)

// memHarness makes a fresh memory store for every case. Your harness makes
// your store over a fresh, empty keyspace (a unique prefix or table).
type memHarness struct{}

func (memHarness) MakeStore(context.Context) (driver.Store, error) { return memory.New(), nil }
func (memHarness) Close()                                          {}

// kvHarness makes every case's store under a key prefix of its own, over one
// client of the test server (here the in-process memory store stands in for
// your client).
type kvHarness struct {
	client *memory.Store
}

func newHarness(ctx context.Context, t *testing.T) (conformance.Harness, error) {
	return &kvHarness{client: memory.New()}, nil
}

// MakeStore returns a store over a fresh, empty keyspace.
func (h *kvHarness) MakeStore(ctx context.Context) (driver.Store, error) {
	return kvbreaker.Prefixed(h.client, rand.Text()+"/")
}

func (h *kvHarness) Close() { h.client.Close() }

// Lifetime reads how long the backend keeps key, with the backend's own
// client, under the name the prefixed store gave it (LifetimeReporter).
func (h *kvHarness) Lifetime(ctx context.Context, s driver.Store, key string) (time.Duration, error) {
	_, prefix, ok := kvbreaker.Unprefixed(s)
	if !ok {
		return 0, fmt.Errorf("%T is not a store of this harness", s)
	}
	return h.client.Expiry(ctx, kvbreaker.PrefixedKey(prefix, key))
}

// An adapter's test calls Run with a HarnessMaker; options tune the suite.
// The harness is the one conformance/ADAPTERS.md shows.
func ExampleRun() {
	// In your adapter's func TestConformance(t *testing.T):
	_ = func(t *testing.T) {
		conformance.Run(t, newHarness, conformance.WithIterations(100))
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
	fmt.Println("expired entries absent for CompareAndSwap broken:", errors.Is(err, conformance.PromiseID("expired-absent-cas")))
	fmt.Println("not verified:", errors.Is(err, conformance.ErrNotVerified))
	err = conformance.Check(ctx, memHarness{}, conformance.WithSkipSlow(true),
		conformance.Waive("foreign-value-replaced", "an in-process store holds only what this process's Breakers wrote"))
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
		conformance.Waive("foreign-value-replaced", "an in-process store holds only what this process's Breakers wrote"))
	fmt.Println("context promise broken:", errors.Is(err, conformance.PromiseID("context-ended")))
	if pr, ok := errors.AsType[*conformance.Problem](err); ok {
		fmt.Printf("case %s broke %s: %s\n", pr.Case, string(pr.Promise), pr.Detail)
	}
	// Output:
	// context promise broken: true
	// case context-ended broke context-ended: Get with a canceled context = kvbreaker: not found, want an error matching context canceled
}
