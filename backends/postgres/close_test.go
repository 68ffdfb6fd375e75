package postgres_test

import (
	"errors"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

// TestCallsAfterCloseFail: after Close every call fails with a
// *driver.OpError that matches ErrClosed (Follow too, before it sends
// anything), and the row written before it is still there for another
// Store over the same pool (Close leaves New's pool to its caller). The
// control is the same calls before Close, which succeed against
// PostgreSQL.
func TestCallsAfterCloseFail(t *testing.T) {
	s := newRaw(t)
	key := uniquePrefix(t) + "k"
	calls := backendtest.StoreCalls(t.Context(), s, key, func(errs map[string]error) {
		_, errs["Purge"] = s.Purge(t.Context())
		errs["Ping"] = s.Ping(t.Context())
	})
	if _, err := s.CompareAndSwap(t.Context(), key+"-kept", driver.NoVersion, []byte("kept"), time.Minute); err != nil {
		t.Fatal(err)
	}
	backendtest.ClosedCalls(t, calls, s.Close, postgres.ErrClosed)
	if _, err := s.PurgeKey(t.Context(), key+"-kept"); !errors.Is(err, postgres.ErrClosed) {
		t.Errorf("PurgeKey after Close = %v, want ErrClosed", err)
	}
	follow := func(driver.Change) { t.Error("Follow after Close delivered a change") }
	if err := s.Follow(t.Context(), key, time.Second, follow); !errors.Is(err, postgres.ErrClosed) {
		t.Errorf("Follow after Close = %v, want ErrClosed", err)
	}
	if err := s.FollowDemand(t.Context(), key, time.Second, make(chan struct{}), follow); !errors.Is(err, postgres.ErrClosed) {
		t.Errorf("FollowDemand after Close = %v, want ErrClosed", err)
	}
	other, err := postgres.New(s.Pool(), s.Table())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if v, _, err := other.Get(t.Context(), key+"-kept"); err != nil || string(v) != "kept" {
		t.Errorf("another Store over the pool: Get = %q, %v; want the value written before Close", v, err)
	}
	if _, err := other.PurgeKey(t.Context(), key+"-kept"); err != nil {
		t.Error(err)
	}
}
