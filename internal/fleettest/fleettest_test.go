package fleettest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/fleettest"
	"github.com/kvbreaker/kvbreaker/internal/tbtest"
)

// lastWriterWins is a store whose writes ignore the version they were
// given: it breaks the atomicity the probe election relies on.
type lastWriterWins struct{ *memory.Store }

func (s lastWriterWins) CompareAndSwap(ctx context.Context, key string, _ driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	_, cur, err := s.Get(ctx, key)
	if err != nil {
		cur = driver.NoVersion
	}
	return s.Store.CompareAndSwap(ctx, key, cur, value, ttl)
}

// cycle runs Cycle over 4 workers sharing store and returns its first
// failure.
func cycle(t *testing.T, store driver.Store) string {
	return tbtest.FirstFailure(t, func(tb testing.TB) {
		f := fleettest.New(tb, []driver.Store{store, store, store, store}, kvbreaker.Settings{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: time.Minute})
		f.Cycle(tb, "h.example", 16)
	})
}

func TestCycle(t *testing.T) {
	if msg := cycle(t, memory.New()); msg != "" {
		t.Fatalf("over an atomic store: %s", msg)
	}
}

// TestCycleCatchesLastWriterWins is Cycle's negative control: without
// compare-and-swap, concurrent failures open the circuit more than once
// or several workers probe. The fault shows only when two workers' calls
// interleave, which the scheduler of a loaded machine may not do in a
// run: runs are repeated until one interleaves, and a machine on which
// none did is undecided (skipped), not a failure.
func TestCycleCatchesLastWriterWins(t *testing.T) {
	const runs = 50
	for range runs {
		msg := cycle(t, lastWriterWins{memory.New()})
		if msg == "" {
			continue
		}
		if !strings.Contains(msg, "transitions") && !strings.Contains(msg, "want 1 probe") && !strings.Contains(msg, "failures in its record") {
			t.Errorf("over a last-writer-wins store: failure %q, want one about transitions, failures or the probe", msg)
		}
		t.Logf("over a last-writer-wins store: %s", msg)
		return
	}
	t.Skipf("undecided: in %d runs no two workers' writes interleaved, so a last-writer-wins store could not show", runs)
}
