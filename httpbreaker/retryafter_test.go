package httpbreaker_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/httpbreaker"
)

// TestRetryAfterLeavesRestraint: a 503 asking to be retried in a second
// still opens the circuit for RecoveryDelay; the Retry-After is the
// caller's, for that message (httpbreaker.RetryAfter).
func TestRetryAfterLeavesRestraint(t *testing.T) {
	f := newFixture(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	var last *http.Response
	for range threshold {
		resp, err := f.get(t, t.Context(), srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		last = resp
	}
	st := f.state(t, srv.URL)
	if want := f.clock.Now().Add(recovery); st.State != kvbreaker.StateOpen || !st.RestrainedUntil.Equal(want) {
		t.Fatalf("after %d 503s with Retry-After: 1: %v until %v, want open until %v (RecoveryDelay)", threshold, st.State, st.RestrainedUntil, want)
	}
	if at, ok := httpbreaker.RetryAfter(last, f.clock.Now()); !ok || !at.Equal(f.clock.Now().Add(time.Second)) {
		t.Fatalf("RetryAfter = %v, %v; want now+1s for the caller", at, ok)
	}
}
