package sqlite_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/sqlite"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

// TestCallsAfterCloseFail: after Close every call fails with a
// *driver.OpError that matches ErrClosed, a new Follow at once and a
// running one as soon as it next reads the file; the row written before
// Close is still in the file for the next Store that opens it. The control
// is the same calls before Close, which succeed.
func TestCallsAfterCloseFail(t *testing.T) {
	path := tempDB(t)
	s := open(t, path, sqlite.WithFollowPoll(time.Millisecond))
	key := uniquePrefix(t) + "k"
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	synced := make(chan struct{}, 1)
	running := make(chan error, 1)
	go func() {
		running <- s.Follow(ctx, key, time.Second, func(c driver.Change) {
			if c.Kind == driver.ChangeSynced {
				select {
				case synced <- struct{}{}:
				default:
				}
			}
		})
	}()
	<-synced

	more := func(errs map[string]error) { _, errs["Purge"] = s.Purge(t.Context()) }
	backendtest.ClosedKeepsRows(t, s, key, more, sqlite.ErrClosed, func() backendtest.KeyPurger { return open(t, path) })
	follow := func(driver.Change) { t.Error("Follow after Close delivered a change") }
	if err := s.Follow(t.Context(), key, time.Second, follow); !errors.Is(err, sqlite.ErrClosed) {
		t.Errorf("Follow after Close = %v, want ErrClosed", err)
	}
	if err := <-running; !errors.Is(err, sqlite.ErrClosed) {
		t.Errorf("a Follow running at Close returned %v, want ErrClosed (not its context's end)", err)
	}
}
