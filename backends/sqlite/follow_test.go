package sqlite_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// TestFollowRefuses: Follow refuses a heartbeat that is not positive, and
// returns at once, with a *driver.OpError, when its first snapshot fails
// (here a closed Store), rather than poll a file it cannot read until its
// context ends; it calls fn for neither.
func TestFollowRefuses(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	st := open(t, tempDB(t))
	called := false
	fn := func(driver.Change) { called = true }
	for _, hb := range []time.Duration{0, -time.Second} {
		if err := st.Follow(ctx, "p/", hb, fn); err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Follow with heartbeat %v = %v, want a refusal", hb, err)
		}
	}
	st.Close()
	err := st.Follow(ctx, "p/", 50*time.Millisecond, fn)
	var oe *driver.OpError
	if !errors.As(err, &oe) || oe.Op != "follow" || oe.Key != "p/" {
		t.Errorf("Follow on a closed Store = %v, want a *driver.OpError of follow p/ at once", err)
	}
	if called {
		t.Error("fn was called")
	}
}
