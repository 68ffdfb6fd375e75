package backendtest_test

import (
	"errors"
	"testing"

	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

// TestSessionHeld: a lost run is skipped and run again, a held one ends it,
// and runs that all lost their session end the test as skipped, neither
// passed nor failed.
func TestSessionHeld(t *testing.T) {
	lost := errors.New("no heartbeat back within 1s")
	var runs []*testing.T
	backendtest.SessionHeld(t, 3, func(t *testing.T) error {
		runs = append(runs, t)
		if len(runs) < 2 {
			return lost
		}
		return nil
	})
	if len(runs) != 2 || !runs[0].Skipped() || runs[1].Skipped() {
		t.Errorf("SessionHeld ran %d times, want 2: once lost and skipped, then held", len(runs))
	}

	runs = nil
	var sub *testing.T
	t.Run("always lost", func(t *testing.T) {
		sub = t
		backendtest.SessionHeld(t, 3, func(t *testing.T) error { runs = append(runs, t); return lost })
		t.Error("SessionHeld returned after every run lost its session")
	})
	if len(runs) != 3 || !sub.Skipped() || sub.Failed() {
		t.Errorf("every run lost: %d runs, skipped %v, failed %v; want 3, skipped, not failed", len(runs), sub.Skipped(), sub.Failed())
	}
}
