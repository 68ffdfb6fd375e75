package etcd_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

// TestListPages pages through a store's keys, hostile ones included, in
// byte order, with no empty last page; keys outside the prefix are not
// listed; a cursor resumes after itself.
func TestListPages(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	want := slices.Clone(hostileKeys)
	for i, k := range want {
		mustCAS(t, s, k, driver.NoVersion, fmt.Sprint(i), longTTL)
	}
	slices.SortFunc(want, byName)
	// A sibling whose prefix extends this one's without its separator.
	sibling := newStoreUnder(t, s.prefix[:len(s.prefix)-1]+"x/")
	mustCAS(t, sibling, "h", driver.NoVersion, "v", longTTL)

	for _, limit := range []int{1, 2, 3, len(want), len(want) + 1, 1000} {
		got, pages := backendtest.ListAll(t, s, "", limit, backendtest.InOrder(esc))
		if !slices.Equal(got, want) {
			t.Errorf("limit %d: listed %q, want %q", limit, got, want)
		}
		if wantPages := (len(want) + limit - 1) / limit; pages != wantPages {
			t.Errorf("limit %d: %d pages, want %d", limit, pages, wantPages)
		}
	}
	// The Store itself, without kvbreaker.Prefixed: whole etcd keys.
	raw, next, err := s.etcd.List(ctx, s.prefix, "", 1000)
	if err != nil || next != "" || len(raw) != len(want) || raw[0] != s.prefix+esc(want[0]) {
		t.Errorf("etcd List(%q) = %d keys from %q, next %q, %v", s.prefix, len(raw), raw[0], next, err)
	}
	// Under a sub-prefix, after a cursor between keys, past the end.
	got, _ := backendtest.ListAll(t, s, "example.com", 2, backendtest.InOrder(esc))
	if w := []string{"example.com", "example.com%2F", "example.com/", "example.com/x"}; !slices.Equal(got, w) {
		t.Errorf("sub-prefix example.com: %q, want %q", got, w)
	}
	// A cursor is any key: the listing goes on after it (on the Store
	// itself; through kvbreaker.Prefixed a cursor is only passed back).
	p := s.prefix
	page, next, err := s.etcd.List(ctx, p, p+"example.com%", 2)
	if err != nil || !slices.Equal(page, []string{p + "example.com%252F", p + "example.com%2F"}) || next != p+"example.com%2F" {
		t.Errorf("after example.com%%: %q, %q, %v", page, next, err)
	}
	if page, next, err := s.etcd.List(ctx, p, p+esc(want[len(want)-1]), 5); err != nil || len(page) != 0 || next != "" {
		t.Errorf("after the last key: %q, %q, %v", page, next, err)
	}
	if page, _, err := s.List(ctx, "nobody/", "", 5); err != nil || len(page) != 0 {
		t.Errorf("empty sub-prefix: %q, %v", page, err)
	}
}

// esc is a key's name under kvbreaker.Prefixed, less the prefix: '%' and
// '/' escaped.
func esc(key string) string { return kvbreaker.PrefixedKey("p/", key)[len("p/"):] }

// byName orders keys as the store lists them through kvbreaker.Prefixed.
func byName(a, b string) int { return strings.Compare(esc(a), esc(b)) }
