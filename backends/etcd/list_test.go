package etcd_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
)

// listAll pages through l with limit, checking each page's size, order and
// cursor, and returns every key and the number of pages.
func listAll(t *testing.T, l driver.Lister, prefix string, limit int) (keys []string, pages int) {
	t.Helper()
	cursor := ""
	for {
		page, next, err := l.List(t.Context(), prefix, cursor, limit)
		if err != nil {
			t.Fatalf("List(%q, %q, %d): %v", prefix, cursor, limit, err)
		}
		pages++
		if len(page) > limit {
			t.Fatalf("page of %d keys, limit %d", len(page), limit)
		}
		// In the store's order: byte order of the names kvbreaker.Prefixed
		// stores ('/' and '%' escaped).
		if !slices.IsSortedFunc(page, byName) || (len(keys) > 0 && len(page) > 0 && esc(page[0]) <= esc(keys[len(keys)-1])) {
			t.Fatalf("page %q after %q: not in order", page, keys)
		}
		keys = append(keys, page...)
		if next == "" {
			return keys, pages
		}
		// The store's cursor is its last key; through kvbreaker.Prefixed
		// it keeps the prefix (cursors are opaque, passed back as they
		// came).
		if !strings.HasSuffix(next, esc(page[len(page)-1])) {
			t.Fatalf("next cursor %q, want the page's last key %q", next, page[len(page)-1])
		}
		if pages > 1000 {
			t.Fatal("listing does not end")
		}
		cursor = next
	}
}

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
		got, pages := listAll(t, s, "", limit)
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
	got, _ := listAll(t, s, "example.com", 2)
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
