package cloudflarekv

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

// TestListArguments: a limit below 1 and another prefix's cursor are
// errors. (Pagination, limits below the list-keys API's minimum of 10,
// prefixes, deleted keys, keys whose logical expiry has passed while KV
// still holds them, kvbreaker.Prefixed: the conformance suite's list cases,
// on Miniflare's clock.)
func TestListArguments(t *testing.T) {
	ctx := t.Context()
	s := newStore(t).Store
	_, _, err := s.List(ctx, "a/", "", 0)
	if oe, ok := errors.AsType[*driver.OpError](err); !ok || oe.Op != "list" || err.Error() != "cloudflarekv: list a/: limit 0 is not positive: pass the most keys a page may hold" {
		t.Fatalf("List with limit 0 = %v, want an OpError", err)
	}
	_, _, err = s.List(ctx, "a/", "b/x"+cursorSep+"c", 2)
	if err == nil || !strings.Contains(err.Error(), "does not belong to a listing of prefix") {
		t.Fatalf("List with another prefix's cursor = %v, want an error", err)
	}
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
	if got, _ := backendtest.ListAll(t, s, "", 100); !slices.Equal(got, []string{"forged.example"}) {
		t.Fatalf("List = %q, want [forged.example]: List and Get must agree", got)
	}
}
