package kvbreaker_test

import (
	"testing"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/skew"
)

// TestUnprefixed: a store Prefixed made gives back the store it wraps and
// its prefix (with or without a clock), so a test can reach the backend's
// own key PrefixedKey(prefix, key); any other store, and the store itself
// that an empty prefix returns, is not one.
func TestUnprefixed(t *testing.T) {
	t.Parallel()
	mem := memory.New()
	withClock := &skew.ClockStore{Store: mem}
	for _, inner := range []driver.Store{mem, withClock} {
		p, err := kvbreaker.Prefixed(inner, "fleet/")
		if err != nil {
			t.Fatal(err)
		}
		got, prefix, ok := kvbreaker.Unprefixed(p)
		if !ok || got != inner || prefix != "fleet/" {
			t.Errorf("Unprefixed(Prefixed(%T, fleet/)) = %T, %q, %v; want the inner store, fleet/, true", inner, got, prefix, ok)
		}
	}
	for _, s := range []driver.Store{mem, withClock, nil} {
		if got, prefix, ok := kvbreaker.Unprefixed(s); ok || got != s || prefix != "" {
			t.Errorf("Unprefixed(%T) = %T, %q, %v; want it back, \"\", false", s, got, prefix, ok)
		}
	}
}
