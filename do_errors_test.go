package kvbreaker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
)

// The tests in this file kill mutants of do.go (go run ./tools/mutants
// -pkg . -files do.go) that the other tests let live.

// TestHeldErrorMessages: a HeldError says whether the delivery was held
// (and until when) or dropped.
func TestHeldErrorMessages(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	held := (&kvbreaker.HeldError{Host: host, Decision: kvbreaker.Hold, RetryAt: at}).Error()
	if !strings.Contains(held, "held until 2026-12-01T00:00:00Z") || strings.Contains(held, "dropped") {
		t.Errorf("held: %q", held)
	}
	dropped := (&kvbreaker.HeldError{Host: host, Decision: kvbreaker.Drop}).Error()
	if !strings.Contains(dropped, "dropped") || strings.Contains(dropped, "held until") {
		t.Errorf("dropped: %q", dropped)
	}
}

// TestDoInvalidHost: Do refuses a host the breaker cannot track without
// running fn.
func TestDoInvalidHost(t *testing.T) {
	b := newBreaker(t, memory.New(), kvbreaker.Settings{})
	ran := false
	err := b.Do(t.Context(), "bad\nhost", func(context.Context) error { ran = true; return nil })
	if !errors.Is(err, driver.ErrInvalidKey) || ran {
		t.Fatalf("Do on an invalid host = %v, fn ran %v; want ErrInvalidKey without running fn", err, ran)
	}
}

// TestReachableNil: Reachable(nil) is nil, so Do reports a Success.
func TestReachableNil(t *testing.T) {
	if err := kvbreaker.Reachable(nil); err != nil {
		t.Fatalf("Reachable(nil) = %#v, want nil", err)
	}
}
