package cloudflarekv

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
)

// listAll pages through l's keys under prefix, limit at a time, and fails
// the test if a page is larger than limit or the listing does not end.
func listAll(t *testing.T, l driver.Lister, prefix string, limit int) []string {
	t.Helper()
	var all []string
	cursor := ""
	for page := 0; ; page++ {
		if page > 200 {
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

// TestList: List pages through the live keys under a prefix, in order,
// and leaves out keys under other prefixes, keys whose logical expiry has
// passed (still in KV, whose physical copy lasts at least 60 s) and deleted
// keys; limits below the list-keys API's minimum of 10 resume within its
// page. Through kvbreaker.Prefixed the cursors survive its prefix coming
// off and going back on.
func TestList(t *testing.T) {
	ctx := t.Context()
	base := uniquePrefix(t.Name())
	s := newStore(t).Store
	// A writer an hour behind: its records expired logically long ago,
	// but KV keeps them for their physical TTL.
	past, err := New(client(), srv.AccountID, srv.NamespaceID, WithClock(func() time.Time { return srv.Now().Add(-time.Hour) }))
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for i := range 12 {
		k := fmt.Sprintf("%sa/live%02d.example", base, i)
		if _, err := s.CompareAndSwap(ctx, k, driver.NoVersion, []byte("r"), time.Hour); err != nil {
			t.Fatal(err)
		}
		live = append(live, k)
	}
	for i := range 3 {
		if _, err := s.CompareAndSwap(ctx, fmt.Sprintf("%sb/other%d.example", base, i), driver.NoVersion, []byte("r"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	expired := base + "a/expired.example"
	if _, err := past.CompareAndSwap(ctx, expired, driver.NoVersion, []byte("r"), time.Minute); err != nil {
		t.Fatal(err)
	}
	deleted := base + "a/deleted.example"
	v, err := s.CompareAndSwap(ctx, deleted, driver.NoVersion, []byte("r"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// The write interval is per key: the delete waits a second.
	if err := s.CompareAndDelete(ctx, deleted, v); err != nil {
		t.Fatal(err)
	}
	for _, st := range []*Store{s, past} {
		if err := st.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, found, err := srv.RawGet(ctx, expired); err != nil || !found {
		t.Fatalf("the expired key is not in KV (%v): the test proves nothing", err)
	}

	for _, limit := range []int{1, 3, 10, 100} {
		t.Run(fmt.Sprint("limit-", limit), func(t *testing.T) {
			got := listAll(t, s, base+"a/", limit)
			if !slices.Equal(got, live) {
				t.Fatalf("List(a/) = %q, want %q", got, live)
			}
		})
	}
	t.Run("whole-prefix", func(t *testing.T) {
		if got := listAll(t, s, base, 4); len(got) != 15 {
			t.Fatalf("List(%q) = %q, want the 15 live keys", base, got)
		}
	})
	t.Run("through-prefixed", func(t *testing.T) {
		p, err := kvbreaker.Prefixed(s, base+"a/")
		if err != nil {
			t.Fatal(err)
		}
		for _, limit := range []int{1, 5} {
			got := listAll(t, p.(driver.Lister), "", limit)
			want := make([]string, len(live))
			for i, k := range live {
				want[i] = strings.TrimPrefix(k, base+"a/")
			}
			if !slices.Equal(got, want) {
				t.Fatalf("Prefixed.List(limit %d) = %q, want %q", limit, got, want)
			}
		}
	})
	t.Run("bad-arguments", func(t *testing.T) {
		_, _, err := s.List(ctx, "a/", "", 0)
		if oe, ok := errors.AsType[*driver.OpError](err); !ok || oe.Op != "list" || err.Error() != "cloudflarekv: list a/: limit 0 is not positive" {
			t.Fatalf("List with limit 0 = %v, want an OpError", err)
		}
		_, _, err = s.List(ctx, "a/", "b/x"+cursorSep+"c", 2)
		if err == nil || !strings.Contains(err.Error(), "does not belong to a listing of prefix") {
			t.Fatalf("List with another prefix's cursor = %v, want an error", err)
		}
	})
}

// TestListAgreesWithGet: a key another process put with a live value
// (envelope) but metadata that says it expired is live to Get, which a
// Breaker decides by, and so List lists it; a key whose value and metadata
// both say expired is left out.
func TestListAgreesWithGet(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	if err := plantForeign(ctx, s.prefix+"forged.example", "live envelope, expired metadata"); err != nil {
		t.Fatal(err)
	}
	past, err := New(client(), srv.AccountID, srv.NamespaceID, WithClock(func() time.Time { return srv.Now().Add(-time.Hour) }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := past.CompareAndSwap(ctx, s.prefix+"expired.example", driver.NoVersion, []byte("r"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := past.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "forged.example"); err != nil {
		t.Fatalf("Get of the live value = %v", err)
	}
	if _, _, err := s.Get(ctx, "expired.example"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("Get of the expired record = %v, want ErrNotFound", err)
	}
	if got := listAll(t, s, "", 100); !slices.Equal(got, []string{"forged.example"}) {
		t.Fatalf("List = %q, want [forged.example]: List and Get must agree", got)
	}
}
