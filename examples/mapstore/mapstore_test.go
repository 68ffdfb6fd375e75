package mapstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/examples/mapstore"
)

// harness gives each conformance case a store of its own, all on one clock
// that Advance moves (conformance.TimeAdvancer), so the suite checks expiry
// without waiting for it.
type harness struct {
	mu  sync.Mutex
	off time.Duration
	// blind, set by the negative control only, wraps each store in one
	// whose compare-and-swap overwrites whatever version is there.
	blind bool
}

func (h *harness) now() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return time.Now().Add(h.off)
}

func (h *harness) MakeStore(context.Context) (driver.Store, error) {
	s := mapstore.New(h.now)
	if h.blind {
		return blindStore{s}, nil
	}
	return s, nil
}

func (h *harness) Advance(_ context.Context, d time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.off += d
	return nil
}

func (h *harness) Close() {}

// ForeignShapes and PlantForeign (conformance.ForeignPlanter) leave at a
// key what another program might: bytes that are no record, for a year.
// The store holds only bytes, so its own compare-and-swap plants them.
func (h *harness) ForeignShapes() []string { return []string{"text"} }

func (h *harness) PlantForeign(ctx context.Context, s driver.Store, key, _ string) error {
	_, v, err := s.Get(ctx, key)
	if err != nil && !errors.Is(err, driver.ErrNotFound) {
		return err
	}
	_, err = s.CompareAndSwap(ctx, key, v, []byte("written by another program"), 365*24*time.Hour)
	return err
}

// TestConformance runs the whole suite over the example adapter, expiry
// measured at an hour's TTL on the moved clock.
func TestConformance(t *testing.T) {
	conformance.Run(t, func(context.Context, *testing.T) (conformance.Harness, error) { return &harness{}, nil },
		conformance.WithExpiryTTL(time.Hour))
}

// blindStore is the example adapter with the classic bug of a store
// without a conditional write: it reads the current version and writes
// over it, so a writer holding a stale version is never refused.
type blindStore struct{ *mapstore.Store }

func (b blindStore) CompareAndSwap(ctx context.Context, key string, _ driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	_, cur, err := b.Get(ctx, key)
	if err != nil && !errors.Is(err, driver.ErrNotFound) {
		return driver.NoVersion, err
	}
	return b.Store.CompareAndSwap(ctx, key, cur, value, ttl)
}

// TestConformanceCatchesBlindWrites is the negative control: the suite
// fails the same adapter once its compare-and-swap stops comparing.
func TestConformanceCatchesBlindWrites(t *testing.T) {
	err := conformance.Check(t.Context(), &harness{blind: true}, conformance.WithSkipSlow(true), conformance.WithExpiryTTL(time.Hour))
	if !errors.Is(err, conformance.PromiseID("stale-version-conflicts")) {
		t.Fatalf("conformance.Check over a store that writes blind = %v, want a failure of %v", err, "stale-version-conflicts")
	}
}

// bare is the harness with no optional capability: the suite can no
// longer plant data another program left at a key (ForeignPlanter), so it
// cannot verify that a Breaker's next write replaces it.
type bare struct{ h *harness }

func (b bare) MakeStore(ctx context.Context) (driver.Store, error) { return b.h.MakeStore(ctx) }
func (b bare) Close()                                              {}

// TestConformanceNamesWhatItCannotVerify: a promise a Breaker relies on
// that the harness gives no way to verify fails Check with
// conformance.ErrNotVerified, naming the Waive call that would accept it;
// with that waiver, Check passes.
func TestConformanceNamesWhatItCannotVerify(t *testing.T) {
	err := conformance.Check(t.Context(), bare{&harness{}}, conformance.WithSkipSlow(true))
	if !errors.Is(err, conformance.ErrNotVerified) || !strings.Contains(err.Error(), `conformance.Waive("foreign-value-replaced"`) {
		t.Fatalf("conformance.Check over a harness without ForeignPlanter = %v, want ErrNotVerified naming the foreign-value-replaced waiver", err)
	}
	waive := conformance.Waive("foreign-value-replaced", "the example's test waives it to show the call")
	if err := conformance.Check(t.Context(), bare{&harness{}}, waive, conformance.WithSkipSlow(true)); err != nil {
		t.Fatalf("with the waiver, conformance.Check = %v, want nil", err)
	}
}
