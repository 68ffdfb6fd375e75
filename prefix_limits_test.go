package kvbreaker_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

// The tests in this file kill mutants of prefix.go (go run ./tools/mutants
// -pkg . -files prefix.go) that the other tests let live.

// maxPrefixLen is the longest prefix Prefixed's documentation accepts.
const maxPrefixLen = 128

// TestPrefixLimits: a prefix of maxPrefixLen bytes is accepted, one byte
// more is not, and an unprintable prefix is refused by name.
func TestPrefixLimits(t *testing.T) {
	inner := memory.New()
	longest := strings.Repeat("p", maxPrefixLen-1) + "/"
	p, err := kvbreaker.Prefixed(inner, longest)
	if err != nil {
		t.Fatalf("Prefixed with a %d-byte prefix = %v", len(longest), err)
	}
	if _, err := p.CompareAndSwap(t.Context(), "x.example", driver.NoVersion, []byte("v"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, _, err := inner.Get(t.Context(), longest+"x.example"); err != nil {
		t.Fatalf("the key is not under the %d-byte prefix: %v", len(longest), err)
	}
	if _, err := kvbreaker.Prefixed(inner, "p"+longest); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("Prefixed with a %d-byte prefix = %v; want an error naming the limit", len(longest)+1, err)
	}
	if _, err := kvbreaker.Prefixed(inner, "a\tb/"); err == nil || !strings.Contains(err.Error(), `"a\tb/"`) {
		t.Fatalf("Prefixed with a tab = %v; want an error naming the prefix", err)
	}
}

// TestPrefixedEscapesRoundTrip: keys holding '/' and '%' anywhere (first,
// last, next to each other and to an escape's digits) are stored escaped
// and listed back exactly.
func TestPrefixedEscapesRoundTrip(t *testing.T) {
	ctx := t.Context()
	inner := memory.New()
	p, err := kvbreaker.Prefixed(inner, "f/")
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]string{
		"/a":     "f/%2Fa",
		"a%":     "f/a%25",
		"%/":     "f/%25%2F",
		"%25x":   "f/%2525x",
		"a/%2Fb": "f/a%2F%252Fb",
		"plain":  "f/plain",
	}
	for k, name := range stored {
		if _, err := p.CompareAndSwap(ctx, k, driver.NoVersion, []byte(k), time.Minute); err != nil {
			t.Fatal(err)
		}
		if v, _, err := inner.Get(ctx, name); err != nil || string(v) != k {
			t.Errorf("key %q: store holds %q = %q, %v; want it stored under that name", k, name, v, err)
		}
	}
	got, _ := backendtest.ListAll(t, p.(driver.Lister), "", 2)
	slices.Sort(got)
	var want []string
	for k := range stored {
		want = append(want, k)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("listed %q; want %q", got, want)
	}
	// A name the prefix's escaping cannot make is no key of this fleet.
	for _, foreign := range []string{"f/%41", "f/x%", "f/x%2"} {
		if _, err := inner.CompareAndSwap(ctx, foreign, driver.NoVersion, []byte("x"), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if got2, _ := backendtest.ListAll(t, p.(driver.Lister), "", 2); len(got2) != len(want) {
		t.Errorf("with foreign names under the prefix, listed %q; want %q", got2, want)
	}
	if keys, _, err := p.(driver.Lister).List(ctx, "none", "", 10); err != nil || len(keys) != 0 {
		t.Errorf("List of an empty range = %q, %v; want nothing", keys, err)
	}
}

// TestPrefixedOptionalInterfaces: over a store without them, Expiry fails
// with errors.ErrUnsupported (and no duration), Flush and Close do
// nothing; over one with them, Expiry reads the prefixed key's.
func TestPrefixedOptionalInterfaces(t *testing.T) {
	ctx := t.Context()
	inner := memory.New()
	bare, err := kvbreaker.Prefixed(struct{ driver.Store }{inner}, "f/")
	if err != nil {
		t.Fatal(err)
	}
	if d, err := bare.(driver.ExpiryReader).Expiry(ctx, "x.example"); !errors.Is(err, errors.ErrUnsupported) || d != 0 {
		t.Errorf("Expiry over a store without it = %v, %v; want 0, errors.ErrUnsupported", d, err)
	}
	if err := bare.(driver.Flusher).Flush(ctx); err != nil {
		t.Errorf("Flush over a store without it = %v", err)
	}
	if err := bare.(interface{ Close() error }).Close(); err != nil {
		t.Errorf("Close over a store without it = %v", err)
	}
	p, err := kvbreaker.Prefixed(inner, "f/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inner.CompareAndSwap(ctx, "f/x.example", driver.NoVersion, []byte("v"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if d, err := p.(driver.ExpiryReader).Expiry(ctx, "x.example"); err != nil || d <= 0 || d > time.Hour {
		t.Errorf("Expiry through the prefix = %v, %v; want the hour the key was stored for", d, err)
	}
}
