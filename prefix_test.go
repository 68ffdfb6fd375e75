package kvbreaker_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/skew"
)

// prefixHarness hands out Prefixed memory stores (all over one inner store,
// each under its own prefix) on a clock Advance moves, so the suite's
// expiry cases run without waiting.
type prefixHarness struct {
	mu    sync.Mutex
	off   time.Duration
	inner *memory.Store
	n     int
}

func (h *prefixHarness) now() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return time.Now().Add(h.off)
}

func (h *prefixHarness) MakeStore(context.Context) (driver.Store, error) {
	h.mu.Lock()
	h.n++
	p := string(rune('a'+h.n%26)) + "/"
	h.mu.Unlock()
	return kvbreaker.Prefixed(h.inner, "fleet-"+p)
}

func (h *prefixHarness) Close() {}

func (h *prefixHarness) Advance(_ context.Context, d time.Duration) error {
	h.mu.Lock()
	h.off += d
	h.mu.Unlock()
	return nil
}

// TestPrefixedConformance: the prefix wrapper keeps every promise of the
// store it wraps. Prefixed is one wrapper over any driver.Store, so the
// suite over memory checks the wrapping once for every backend.
func TestPrefixedConformance(t *testing.T) {
	conformance.Run(t, func(context.Context, *testing.T) (conformance.Harness, error) {
		h := &prefixHarness{}
		h.inner = memory.New(memory.WithClock(h.now))
		return h, nil
	}, conformance.WithExpiryTTL(time.Hour),
		conformance.Waive("foreign-value-replaced", "Prefixed passes values through unchanged; backends/memory's suite plants foreign values in the store it wraps"))
}

// TestPrefixed: keys land under the prefix in the inner store, listing sees
// only the prefix's keys without it, and bad prefixes are refused.
func TestPrefixed(t *testing.T) {
	ctx := t.Context()
	inner := memory.New()
	a, err := kvbreaker.Prefixed(inner, "a/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := kvbreaker.Prefixed(inner, "b/")
	for _, k := range []string{"x.example", "y.example"} {
		if _, err := a.CompareAndSwap(ctx, k, driver.NoVersion, []byte("v"), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.CompareAndSwap(ctx, "x.example", driver.NoVersion, []byte("w"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, _, err := inner.Get(ctx, "a/x.example"); err != nil || string(v) != "v" {
		t.Errorf("inner a/x.example = %q, %v; want the value written through the prefix", v, err)
	}
	if v, _, err := b.Get(ctx, "x.example"); err != nil || string(v) != "w" {
		t.Errorf("b x.example = %q, %v; want b's own value", v, err)
	}
	keys, next, err := a.(driver.Lister).List(ctx, "", "", 10)
	if err != nil || next != "" || !slices.Equal(keys, []string{"x.example", "y.example"}) {
		t.Errorf("List through a/ = %q, %q, %v; want a's two keys without the prefix", keys, next, err)
	}
	if s, _ := kvbreaker.Prefixed(inner, ""); s != driver.Store(inner) {
		t.Error("an empty prefix should return the store itself")
	}
	for _, bad := range []string{"a\nb/", string(make([]byte, maxPrefixLen+1))} {
		if _, err := kvbreaker.Prefixed(inner, bad); err == nil {
			t.Errorf("Prefixed(%q) accepted", bad)
		}
	}
	if _, err := kvbreaker.Prefixed(nil, "a/"); err == nil {
		t.Error("Prefixed(nil) accepted")
	}
	// A store that cannot list says so, through the wrapper too.
	c, _ := kvbreaker.Prefixed(struct{ driver.Store }{inner}, "c/")
	if _, _, err := c.(driver.Lister).List(ctx, "", "", 10); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("List over a store without Lister: %v; want errors.ErrUnsupported", err)
	}
}

// TestPrefixedClock: Prefixed shows the store's clock when the store has
// one, and only then (a Breaker checks the clock of every store that
// seems to have one).
func TestPrefixedClock(t *testing.T) {
	plain, err := kvbreaker.Prefixed(memory.New(), "a/")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := plain.(driver.ClockSampler); ok {
		t.Error("Prefixed over memory claims a clock memory does not have")
	}
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clocked, err := kvbreaker.Prefixed(&skew.ClockStore{Store: memory.New(), Clock: func() time.Time { return at }, Resolution: time.Second}, "a/")
	if err != nil {
		t.Fatal(err)
	}
	cs, ok := clocked.(driver.ClockSampler)
	if !ok {
		t.Fatal("Prefixed hides the clock of a store that has one")
	}
	if got, res, err := cs.SampleClock(t.Context()); err != nil || !got.Equal(at) || res != time.Second {
		t.Errorf("SampleClock through Prefixed = %v, %v, %v; want %v, 1s", got, res, err, at)
	}
	if _, ok := clocked.(driver.Lister); !ok {
		t.Error("the clocked Prefixed store no longer lists")
	}
}

// No fleet's prefix nests in another's: a prefix must end in '/', and keys
// under it hold no '/' of their own, so "prod/" shares no key with
// "prod/eu/", and lists none of its keys (nor a foreign name).
func TestPrefixesDoNotNest(t *testing.T) {
	ctx := t.Context()
	inner := memory.New()
	for _, bad := range []string{"prod", "prod2", "kvbreaker:", "a/b"} {
		if _, err := kvbreaker.Prefixed(inner, bad); err == nil || !strings.Contains(err.Error(), bad+"/") {
			t.Errorf("Prefixed(%q) = %v; want an error suggesting %q", bad, err, bad+"/")
		}
	}
	prod, err := kvbreaker.Prefixed(inner, "prod/")
	if err != nil {
		t.Fatal(err)
	}
	eu, err := kvbreaker.Prefixed(inner, "prod/eu/")
	if err != nil {
		t.Fatal(err)
	}
	// Every pair that would collide if keys were stored as they are.
	prodKeys := []string{"eu/x.example", "eu%2Fx.example", "a%b", "%2F", "x.example"}
	for i, k := range prodKeys {
		if _, err := prod.CompareAndSwap(ctx, k, driver.NoVersion, []byte{byte(i)}, time.Minute); err != nil {
			t.Fatalf("prod CompareAndSwap(%q) = %v", k, err)
		}
	}
	if _, err := eu.CompareAndSwap(ctx, "x.example", driver.NoVersion, []byte("eu"), time.Minute); err != nil {
		t.Fatal(err)
	}
	for i, k := range prodKeys {
		if v, _, err := prod.Get(ctx, k); err != nil || !bytes.Equal(v, []byte{byte(i)}) {
			t.Errorf("prod Get(%q) = %q, %v; want its own value %d", k, v, err, i)
		}
		// PrefixedKey names where it is stored.
		if v, _, err := inner.Get(ctx, kvbreaker.PrefixedKey("prod/", k)); err != nil || !bytes.Equal(v, []byte{byte(i)}) {
			t.Errorf("inner Get(PrefixedKey(prod/, %q)) = %q, %v; want the value written through the prefix", k, v, err)
		}
	}
	if got := kvbreaker.PrefixedKey("", "a/b%"); got != "a/b%" {
		t.Errorf("PrefixedKey with no prefix = %q; want the key as it is", got)
	}
	if v, _, err := eu.Get(ctx, "x.example"); err != nil || string(v) != "eu" {
		t.Errorf("prod/eu/ Get(x.example) = %q, %v; want its own value", v, err)
	}
	// A foreign name under the prefix (not an escape this package makes).
	if _, err := inner.CompareAndSwap(ctx, "prod/bad%zz", driver.NoVersion, []byte("x"), time.Minute); err != nil {
		t.Fatal(err)
	}
	got, _ := backendtest.ListAll(t, prod.(driver.Lister), "", 2)
	slices.Sort(got)
	want := slices.Clone(prodKeys)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("prod/ lists %q; want only its own keys %q", got, want)
	}
	if got, _ := backendtest.ListAll(t, eu.(driver.Lister), "", 2); !slices.Equal(got, []string{"x.example"}) {
		t.Errorf("prod/eu/ lists %q; want [x.example]", got)
	}
	if got, _ := backendtest.ListAll(t, prod.(driver.Lister), "eu/", 2); !slices.Equal(got, []string{"eu/x.example"}) {
		t.Errorf("prod/ lists %q under eu/; want [eu/x.example]", got)
	}
}
