package cloudflarekv

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// kvExpiration is the key's expiration as Miniflare lists it (0: none).
func kvExpiration(t *testing.T, full string) int64 {
	t.Helper()
	keys, err := srv.List(t.Context(), full)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Name == full {
			return k.Expiration
		}
	}
	t.Fatalf("%q is not listed", full)
	return 0
}

// TestExpiry: driver.ExpiryReader through kvbreaker.Prefixed, on
// Miniflare's clock: a written key expires at its logical expiry (exact to
// the millisecond), a foreign value at its expiration, or never
// (driver.NoExpiry); absent and logically expired keys are ErrNotFound.
func TestExpiry(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	er := s.p.(driver.ExpiryReader)
	if _, err := er.Expiry(ctx, "absent.example"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("Expiry of an absent key = %v, want ErrNotFound", err)
	}
	if _, err := s.CompareAndSwap(ctx, "written.example", driver.NoVersion, []byte("r"), 90*time.Second); err != nil {
		t.Fatal(err)
	}
	if d, err := er.Expiry(ctx, "written.example"); err != nil || d != 90*time.Second {
		t.Fatalf("Expiry of a queued write with TTL 90s = %v, %v", d, err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if d, err := er.Expiry(ctx, "written.example"); err != nil || d != 90*time.Second {
		t.Fatalf("Expiry after a write with TTL 90s = %v, %v", d, err)
	}
	if err := plantForeign(ctx, s.prefix+"raw.example", "garbage, no expiration"); err != nil {
		t.Fatal(err)
	}
	if d, err := er.Expiry(ctx, "raw.example"); err != nil || d != driver.NoExpiry {
		t.Fatalf("Expiry of a value put without expiration = %v, %v; want driver.NoExpiry", d, err)
	}
	// A raw value with expiration_ttl: its expiration, on KV's clock.
	res, err := srv.Do(ctx, http.MethodPut, "values/"+url.PathEscape(s.prefix+"ttl.example")+"?expiration_ttl=120", strings.NewReader("raw"))
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	exp := time.Unix(kvExpiration(t, s.prefix+"ttl.example"), 0)
	if d, err := er.Expiry(ctx, "ttl.example"); err != nil || d != max(exp.Sub(srv.Now()), 0) || d < 119*time.Second {
		t.Fatalf("Expiry of a raw value with expiration_ttl=120 = %v, %v; want %v", d, err, exp.Sub(srv.Now()))
	}
	if err := srv.Advance(ctx, 91*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := er.Expiry(ctx, "written.example"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("Expiry of a logically expired key = %v, want ErrNotFound", err)
	}
}
