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
// *driver.OpError that matches ErrClosed (Follow and FollowDemand too,
// before they send anything), and the row written before it is still
// there for another Store over the same pool (Close leaves New's pool to
// its caller). The control is the same calls before Close, which succeed
// against PostgreSQL.
func TestCallsAfterCloseFail(t *testing.T) {
	s := newRaw(t)
	key := uniquePrefix(t) + "k"
	more := func(errs map[string]error) {
		_, errs["Purge"] = s.Purge(t.Context())
		errs["Ping"] = s.Ping(t.Context())
	}
	backendtest.ClosedKeepsRows(t, s, key, more, postgres.ErrClosed, func() backendtest.KeyPurger {
		other, err := postgres.New(s.Pool(), s.Table())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { other.Close() })
		return other
	})
	follow := func(driver.Change) { t.Error("Follow after Close delivered a change") }
	if err := s.Follow(t.Context(), key, time.Second, follow); !errors.Is(err, postgres.ErrClosed) {
		t.Errorf("Follow after Close = %v, want ErrClosed", err)
	}
	if err := s.FollowDemand(t.Context(), key, time.Second, make(chan struct{}), follow); !errors.Is(err, postgres.ErrClosed) {
		t.Errorf("FollowDemand after Close = %v, want ErrClosed", err)
	}
}
