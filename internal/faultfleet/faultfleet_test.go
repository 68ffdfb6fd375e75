package faultfleet_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/leakcheck"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/faultfleet"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

func shared(st driver.Store) func(context.Context, int) (driver.Store, error) {
	return func(context.Context, int) (driver.Store, error) { return st, nil }
}

// TestCorrectStorePasses is the positive control: the memory store, no
// faults, every check on.
func TestCorrectStorePasses(t *testing.T) {
	st := memory.New()
	rep, err := faultfleet.Run(t.Context(), faultfleet.Config{
		NewStore: shared(st), Observer: st, Duration: time.Second,
	})
	t.Log(rep)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Transitions["closed→open"] == 0 || rep.Transitions["open→half-open"] == 0 || rep.Calls["allow:probe"] == 0 {
		t.Fatalf("the run never opened and probed a circuit: %v", rep)
	}
}

// retriedWrites is an adapter that retries a mutation blindly: every few
// writes, it answers like an SDK whose retry of an applied write met that
// write: a conflict carrying its own value and version.
type retriedWrites struct {
	driver.Store
	n atomic.Int64
}

func (s *retriedWrites) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	ver, err := s.Store.CompareAndSwap(ctx, key, old, value, ttl)
	if err == nil && s.n.Add(1)%3 == 0 {
		return 0, &driver.ConflictError{Value: value, Version: ver}
	}
	return ver, err
}

// TestOwnWriteConflictFails is the negative control: the checks catch the
// double-counted failure, the probe winner told Hold and the unreported
// opening that an adapter returning its own write as a conflict causes.
//
// The fleet's calls are random, so one run may not hit every kind (a
// loaded CI run made only 15 Failures and no double count): up to three
// runs are made until each kind has shown, and every run must find some.
func TestOwnWriteConflictFails(t *testing.T) {
	kinds := []string{"counted twice", "won the probe election", "opened the circuit"}
	var all strings.Builder
	for run := 0; run < 3; run++ {
		mem := memory.New()
		st := &retriedWrites{Store: mem}
		rep, err := faultfleet.Run(t.Context(), faultfleet.Config{
			NewStore: shared(st), Observer: mem, Duration: 1500 * time.Millisecond,
		})
		t.Log(rep)
		if !errors.Is(err, faultfleet.ErrViolation) {
			t.Fatalf("run %d: got %v, want violations", run, err)
		}
		all.WriteString(err.Error())
		missing := 0
		for _, want := range kinds {
			if !strings.Contains(all.String(), want) {
				missing++
			}
		}
		if missing == 0 {
			return
		}
	}
	for _, want := range kinds {
		if !strings.Contains(all.String(), want) {
			t.Errorf("no violation saying %q in three runs:\n%v", want, all.String())
		}
	}
}

// stuck ignores its context on some reads, as a client with no deadline on
// a hung connection would.
type stuck struct {
	driver.Store
	n atomic.Int64
}

func (s *stuck) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	if s.n.Add(1)%40 == 0 {
		time.Sleep(400 * time.Millisecond) // a stuck call, not a wait for logic
	}
	return s.Store.Get(ctx, key)
}

// TestStuckCallFails: a call that outlives its context is reported.
func TestStuckCallFails(t *testing.T) {
	mem := memory.New()
	rep, err := faultfleet.Run(t.Context(), faultfleet.Config{
		NewStore: shared(&stuck{Store: mem}), Observer: mem, Duration: time.Second,
		Settings: kvbreaker.Settings{CallTimeout: 100 * time.Millisecond}, Slack: 100 * time.Millisecond,
		Checks: faultfleet.CheckCallTime,
	})
	t.Log(rep)
	if err == nil || !strings.Contains(err.Error(), "more than CallTimeout") {
		t.Fatalf("got %v, want a call-time violation", err)
	}
}

// TestChecksFor: a last-writer-wins store is not held to a single probe.
func TestChecksFor(t *testing.T) {
	if c := faultfleet.ChecksFor(driver.Traits{Atomic: false}); c&faultfleet.CheckOneProbe != 0 || c&faultfleet.CheckFailuresOnce == 0 {
		t.Fatalf("ChecksFor(non-atomic) = %b", c)
	}
	if faultfleet.ChecksFor(driver.Traits{Atomic: true}) != faultfleet.CheckAll {
		t.Fatal("ChecksFor(atomic) is not CheckAll")
	}
}
