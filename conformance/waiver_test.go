package conformance_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestCheckFailsClosed: Check over a harness without capabilities returns
// an error matching ErrNotVerified (and no broken promise) that names the
// unverified promises a Breaker relies on and the Waive calls; a store
// capping every TTL at a minute, which only a capability could catch,
// fails the same way; with the waivers Check returns nil. Under
// WithSkipSlow what the cases that wait in real time leave unverified is
// excused, and what no wait would verify (foreign data) is not.
func TestCheckFailsClosed(t *testing.T) {
	t.Parallel()
	waivers := []conformance.Option{
		conformance.Waive("state-ttl", stateTTLWaiver),
		conformance.Waive("foreign-value-replaced", foreignWaiver),
	}
	for _, tc := range []struct {
		name  string
		h     conformance.Harness
		opts  []conformance.Option
		wants []string // in the error; none: Check must return nil
	}{
		{"bare", memoryHarness(plain), nil, []string{"\"state-ttl\"", "\"foreign-value-replaced\"", "LifetimeReporter", "ForeignPlanter"}},
		{"capped", memoryHarness(func(s *memory.Store) driver.Store { return capped{s} }), nil, []string{"\"state-ttl\""}},
		{"bare-short", memoryHarness(plain), []conformance.Option{conformance.WithSkipSlow(true)}, []string{"\"foreign-value-replaced\""}},
		{"waived", memoryHarness(plain), waivers, nil},
		{"capped-waived", memoryHarness(func(s *memory.Store) driver.Store { return capped{s} }), waivers, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := conformance.Check(t.Context(), tc.h, tc.opts...)
			if tc.wants == nil {
				if err != nil {
					t.Fatalf("Check with the waivers = %v", err)
				}
				return
			}
			if !errors.Is(err, conformance.ErrNotVerified) {
				t.Fatalf("Check = %v, want an error matching ErrNotVerified", err)
			}
			if _, broken := errors.AsType[*conformance.Problem](err); broken {
				t.Errorf("Check reports a broken promise: %v", err)
			}
			for _, w := range append(tc.wants, "conformance.Waive(") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error lacks %q:\n%v", w, err)
				}
			}
			if tc.name == "bare-short" && strings.Contains(err.Error(), `"state-ttl"`) {
				t.Errorf("under WithSkipSlow the error names the state TTL, which a run without would check:\n%v", err)
			}
		})
	}
}

// TestWaiverRefused: a waiver without a reason, of a promise the suite
// always verifies, or twice of one promise makes Check fail before it runs
// a case, saying why.
func TestWaiverRefused(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		opts []conformance.Option
		want string
	}{
		"no reason":    {[]conformance.Option{conformance.Waive("state-ttl", "")}, "a waiver needs a reason"},
		"blank reason": {[]conformance.Option{conformance.Waive("state-ttl", " \t")}, "a waiver needs a reason"},
		"always verified": {[]conformance.Option{conformance.Waive("create", "no")},
			"cannot be waived; only these can: "},
		"unknown": {[]conformance.Option{conformance.Waive("no-such-promise", "no")}, "no such promise"},
		"twice": {[]conformance.Option{conformance.Waive("foreign-value-replaced", "a"), conformance.Waive("foreign-value-replaced", "b")},
			"waived twice"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := &countingHarness{}
			err := conformance.Check(t.Context(), h, tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check = %v, want an error saying %q", err, tc.want)
			}
			if n := h.made.Load(); n > 0 {
				t.Errorf("Check made %d stores before refusing the waiver", n)
			}
		})
	}
}

// countingHarness counts the stores it makes.
type countingHarness struct{ made atomic.Int64 }

func (h *countingHarness) MakeStore(context.Context) (driver.Store, error) {
	h.made.Add(1)
	return memory.New(), nil
}

func (h *countingHarness) Close() {}

// TestNotVerifiedIsNotPassed: a case that left its promise unverified has
// not passed (Result.Passed is false) and its status says so, NOT
// VERIFIED, or WAIVED when the harness waived it, never PASS; the report
// lists the waiver with its reason.
func TestNotVerifiedIsNotPassed(t *testing.T) {
	t.Parallel()
	for _, waived := range []bool{false, true} {
		var opts []conformance.Option
		status := "NOT VERIFIED"
		if waived {
			opts = append(opts, conformance.Waive("state-ttl", stateTTLWaiver))
			status = "WAIVED"
		}
		rep, err := measure(t, memoryHarness(plain), append(opts, conformance.WithSkipSlow(true))...)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range rep.Results {
			if r.Case != "expiry-at-state-ttl" {
				continue
			}
			found = true
			if r.Passed() || r.Status() != status {
				t.Errorf("waived %v: %s: Passed() = %v, Status() = %q, want false, %q", waived, r.Case, r.Passed(), r.Status(), status)
			}
		}
		if !found {
			t.Fatalf("no %s result", "expiry-at-state-ttl")
		}
		s := rep.String()
		if !strings.Contains(s, status+" ") || strings.Contains(s, "PASS         "+"expiry-at-state-ttl") {
			t.Errorf("waived %v: the report does not show %s for %s:\n%s", waived, status, "expiry-at-state-ttl", s)
		}
		if waived && !strings.Contains(s, "waived by the harness: "+stateTTLWaiver) {
			t.Errorf("the report does not show the waiver:\n%s", s)
		}
	}
}
