package miniflare_test

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/testservers/miniflare"
)

// TestFixture checks what the adapters' tests rely on: the REST routes, the
// simulator's 60 s minimum TTL, Advance making an entry expire, the write
// limit, Throttle, and Stop ending the processes.
func TestFixture(t *testing.T) {
	ctx := t.Context()
	srv := miniflare.MustStart(t, miniflare.WriteLimit())
	put := func(key, query string) int {
		t.Helper()
		res, err := srv.Do(ctx, http.MethodPut, "values/"+key+query, strings.NewReader("v"))
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		return res.StatusCode
	}
	if code := put("short", "?expiration_ttl=59"); code != http.StatusBadRequest {
		t.Errorf("PUT with expiration_ttl=59: status %d, want 400 (the simulator's 60 s minimum)", code)
	}
	if code := put("a%2F..%3F", "?expiration_ttl=60"); code != http.StatusOK {
		t.Fatalf("PUT: status %d", code)
	}
	if code := put("a%2F..%3F", "?expiration_ttl=60"); code != http.StatusTooManyRequests {
		t.Errorf("second PUT within 1 s: status %d, want 429", code)
	}
	v, _, found, err := srv.RawGet(ctx, "a/..?")
	if err != nil || !found || string(v) != "v" {
		t.Fatalf("RawGet = %q, %v, %v", v, found, err)
	}
	before := srv.Now()
	if err := srv.Advance(ctx, 59*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := srv.Now().Sub(before); got != 59*time.Second {
		t.Errorf("Now moved by %v after Advance(59s)", got)
	}
	if _, _, found, _ := srv.RawGet(ctx, "a/..?"); !found {
		t.Error("entry gone 59 s into a 60 s TTL")
	}
	// Frozen between advances: a real second changes nothing.
	time.Sleep(1100 * time.Millisecond)
	if _, _, found, _ := srv.RawGet(ctx, "a/..?"); !found {
		t.Error("entry gone 59 s (plus a real second) into a 60 s TTL: the KV clock is not frozen")
	}
	if err := srv.Advance(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, _, found, _ := srv.RawGet(ctx, "a/..?"); found {
		t.Error("entry still there 61 s into a 60 s TTL")
	}
	// Fractions of a millisecond add up: ten steps of 1.5 ms move the
	// clock 15 ms.
	before = srv.Now()
	for range 10 {
		if err := srv.Advance(ctx, 1500*time.Microsecond); err != nil {
			t.Fatal(err)
		}
	}
	if got := srv.Now().Sub(before); got != 15*time.Millisecond {
		t.Errorf("Now moved by %v after ten Advance(1.5ms), want 15ms", got)
	}
	if err := srv.Throttle(ctx, 1, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	res, err := srv.Do(ctx, http.MethodGet, "values/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "2" {
		t.Errorf("throttled GET: %s, Retry-After %q", res.Status, res.Header.Get("Retry-After"))
	}
	st, err := srv.Stats(ctx)
	if err != nil || st.Throttled != 1 || st.RateLimited != 1 {
		t.Errorf("Stats = %+v, %v", st, err)
	}
	pid := srv.PID()
	srv.Stop()
	if err := syscall.Kill(-pid, 0); err == nil {
		t.Errorf("process group %d still alive after Stop", pid)
	}
}
