package dynamodb_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/driver"
)

// listAll pages through l's keys under prefix, limit at a time, and fails
// the test if a page is larger than limit or the listing does not end.
func listAll(t *testing.T, l driver.Lister, prefix string, limit int) []string {
	t.Helper()
	var all []string
	cursor := ""
	for page := 0; ; page++ {
		if page > 1000 {
			t.Fatalf("List(%q) has not ended after %d pages (cursor %q)", prefix, page, cursor)
		}
		keys, next, err := l.List(t.Context(), prefix, cursor, limit)
		if err != nil {
			t.Fatalf("List(%q, %q, %d): %v", prefix, cursor, limit, err)
		}
		if len(keys) > limit {
			t.Fatalf("List(%q, %q, %d) returned %d keys", prefix, cursor, limit, len(keys))
		}
		all = append(all, keys...)
		if next == "" {
			return all
		}
		cursor = next
	}
}

// TestList: List pages through the live keys under a prefix, and leaves out
// keys under other prefixes, logically expired items (still in the table:
// dynalite, like DynamoDB for days, has not deleted them) and the tombstones
// deletes leave. The table is the test's own, so the Scan sees only these
// items.
func TestList(t *testing.T) {
	ctx := t.Context()
	tbl := fmt.Sprintf("list-%d", prefixes.Add(1))
	if err := dynamodb.CreateTable(ctx, client, tbl); err != nil {
		t.Fatal(err)
	}
	clk := newFakeClock(time.Unix(1_900_000_000, 0))
	s, err := dynamodb.New(client, tbl, dynamodb.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for i := range 7 {
		k := fmt.Sprintf("a/live%d.example", i)
		if _, err := s.CompareAndSwap(ctx, k, driver.NoVersion, []byte("r"), time.Hour); err != nil {
			t.Fatal(err)
		}
		live = append(live, k)
	}
	// Another prefix: listed under "" only.
	for i := range 4 {
		if _, err := s.CompareAndSwap(ctx, fmt.Sprintf("b/other%d.example", i), driver.NoVersion, []byte("r"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	// Expired by the store's clock, present in the table.
	if _, err := s.CompareAndSwap(ctx, "a/expired.example", driver.NoVersion, []byte("r"), time.Second); err != nil {
		t.Fatal(err)
	}
	// Deleted: a tombstone item.
	v, err := s.CompareAndSwap(ctx, "a/deleted.example", driver.NoVersion, []byte("r"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompareAndDelete(ctx, "a/deleted.example", v); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	if raw := rawItemIn(t, tbl, "a/expired.example"); raw == nil {
		t.Fatal("the expired item is not in the table: the test proves nothing")
	}
	if raw := rawItemIn(t, tbl, "a/deleted.example"); raw == nil {
		t.Fatal("the tombstone is not in the table: the test proves nothing")
	}
	slices.Sort(live)

	for _, limit := range []int{1, 2, 3, 100} {
		t.Run(fmt.Sprint("limit-", limit), func(t *testing.T) {
			got := listAll(t, s, "a/", limit)
			slices.Sort(got)
			if !slices.Equal(got, live) {
				t.Fatalf("List(a/) = %q, want %q", got, live)
			}
		})
	}
	t.Run("empty-prefix-lists-all-live", func(t *testing.T) {
		if got := listAll(t, s, "", 2); len(got) != 11 {
			t.Fatalf("List(\"\") = %q, want the 11 live keys", got)
		}
	})
	// Through kvbreaker.Prefixed: its prefix comes off the keys and the
	// cursors, and goes back on the cursors, which must therefore begin
	// with it even when the Scan stopped at an item under another prefix.
	t.Run("through-prefixed", func(t *testing.T) {
		p, err := kvbreaker.Prefixed(s, "a/")
		if err != nil {
			t.Fatal(err)
		}
		got := listAll(t, p.(driver.Lister), "", 1)
		slices.Sort(got)
		want := make([]string, len(live))
		for i, k := range live {
			want[i] = strings.TrimPrefix(k, "a/")
		}
		if !slices.Equal(got, want) {
			t.Fatalf("Prefixed(a/).List = %q, want %q", got, want)
		}
	})
	t.Run("bad-arguments", func(t *testing.T) {
		_, _, err := s.List(ctx, "a/", "", 0)
		if oe, ok := errors.AsType[*driver.OpError](err); !ok || oe.Op != "list" || !strings.Contains(err.Error(), "dynamodb: list a/: limit 0 is not positive") {
			t.Fatalf("List with limit 0 = %v, want an OpError", err)
		}
		_, _, err = s.List(ctx, "a/", "b/\x1fb/other1.example", 2)
		if err == nil || !strings.Contains(err.Error(), "belongs to a listing of prefix") {
			t.Fatalf("List with another prefix's cursor = %v, want an error", err)
		}
	})
}
