package conformance_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/conformcheck"
)

// errNil is what a Redis client returns for a missing key (redis.Nil),
// which an adapter must turn into driver.ErrNotFound.
var errNil = errors.New("redis: nil")

// nilOnMissing returns its client's own not-found error instead of
// driver.ErrNotFound.
type nilOnMissing struct{ *memory.Store }

func (s nilOnMissing) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	v, ver, err := s.Store.Get(ctx, key)
	if errors.Is(err, driver.ErrNotFound) {
		return nil, 0, errNil
	}
	return v, ver, err
}

// TestGetMissingWrongError: a store that answers Get of a missing key at
// once, with an error other than driver.ErrNotFound, is told what it
// returned and what was expected, under "get-absent-not-found", not that it did
// not answer.
func TestGetMissingWrongError(t *testing.T) {
	t.Parallel()
	start := time.Now()
	rep, err := measure(t, memoryHarness(func(s *memory.Store) driver.Store { return nilOnMissing{s} }), conformance.WithSkipSlow(true))
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v", took)
	}
	wantBroken(t, rep, err, "reachable", "get-absent-not-found")
	msg := err.Error()
	for _, want := range []string{"returned redis: nil", "want an error matching driver.ErrNotFound"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the problem does not say %q: %v", want, msg)
		}
	}
	if strings.Contains(msg, "did not answer") {
		t.Errorf("the problem says the store did not answer, but it answered: %v", msg)
	}
}

// TestGetMissingSilent: the negative control. A store that does not
// answer still reads as not answering, under "reachable".
func TestGetMissingSilent(t *testing.T) {
	t.Parallel()
	rep, err := measure(t, memoryHarness(func(s *memory.Store) driver.Store { return hung{s} }), conformcheck.WithReachTimeout(200*time.Millisecond))
	wantBroken(t, rep, err, "reachable", "reachable")
	if !strings.Contains(err.Error(), "did not answer Get within 200ms") {
		t.Errorf("the problem does not say the store did not answer: %v", err)
	}
	if errors.Is(err, conformance.PromiseID("get-absent-not-found")) {
		t.Errorf("a store that did not answer is reported as answering wrongly: %v", err)
	}
}

// TestGetAbsentMessage: the get-absent case says what a Get of a key never
// written returned and what it should have.
func TestGetAbsentMessage(t *testing.T) {
	t.Parallel()
	// Wrong only for the get-absent case's key, so the first Get passes.
	rep, err := measure(t, memoryHarness(func(s *memory.Store) driver.Store { return presentAbsent{s} }), conformance.WithSkipSlow(true))
	wantBroken(t, rep, err, "get-absent", "get-absent-not-found")
	if !strings.Contains(err.Error(), `returned value "ghost", version 7, error <nil>; want an error matching driver.ErrNotFound`) {
		t.Errorf("the problem does not say what Get returned and what it should have: %v", err)
	}
}

// presentAbsent answers Get("absent.example") with a value.
type presentAbsent struct{ *memory.Store }

func (s presentAbsent) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	if key == "absent.example" {
		return []byte("ghost"), 7, nil
	}
	return s.Store.Get(ctx, key)
}
