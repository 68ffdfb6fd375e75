package backendtest

import (
	"testing"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
)

// ListStore is a Store that lists, as kvbreaker.Prefixed returns one over
// a store that lists.
type ListStore interface {
	driver.Store
	driver.Lister
}

// Isolate returns s under prefix (kvbreaker.Prefixed), so that tests
// sharing one server or table never see each other's keys. s must list.
func Isolate(t testing.TB, s driver.Store, prefix string) ListStore {
	t.Helper()
	p, err := kvbreaker.Prefixed(s, prefix)
	if err != nil {
		t.Fatal(err)
	}
	l, ok := p.(ListStore)
	if !ok {
		t.Fatalf("%T under a prefix does not list", s)
	}
	return l
}
