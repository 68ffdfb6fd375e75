package adapter_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// gateOver is a Gate over a closed flag whose Wrap makes an OpError of the
// op and key it is given, as an adapter's does.
func gateOver(closed *bool) adapter.Gate {
	return adapter.Gate{
		Closed:    func() bool { return *closed },
		ErrClosed: errClosed,
		Wrap: func(op, key string, err error) error {
			return &driver.OpError{Backend: "test", Op: op, Key: key, Err: err}
		},
	}
}

// TestGateFollowOrder: FollowDemand's nil want is refused whatever the
// store's state, a closed store before bad arguments, bad arguments of an
// open store; each refusal an OpError of op "follow" and the prefix. A
// good call passes, and Follow (demand false) takes a nil want: the
// controls that the Gate does not refuse everything.
func TestGateFollowOrder(t *testing.T) {
	fn := func(driver.Change) {}
	want := make(chan struct{})
	for _, tc := range []struct {
		name      string
		closed    bool
		heartbeat time.Duration
		demand    bool
		want      <-chan struct{}
		fn        func(driver.Change)
		refusal   string // in the error; "" passes
	}{
		{"nil want, closed", true, 0, true, nil, nil, "want is nil"},
		{"closed, bad arguments", true, 0, false, nil, nil, errClosed.Error()},
		{"zero heartbeat", false, 0, true, want, fn, "heartbeat 0s is not positive"},
		{"nil fn", false, time.Second, false, nil, nil, "fn is nil"},
		{"follow", false, time.Second, false, nil, fn, ""},
		{"the least positive heartbeat", false, time.Nanosecond, false, nil, fn, ""},
		{"follow demand", false, time.Second, true, want, fn, ""},
	} {
		closed := tc.closed
		err := gateOver(&closed).Follow("p/", tc.heartbeat, tc.demand, tc.want, tc.fn)
		if tc.refusal == "" {
			if err != nil {
				t.Errorf("%s: Follow = %v, want nil", tc.name, err)
			}
			continue
		}
		var op *driver.OpError
		if !errors.As(err, &op) || op.Op != "follow" || op.Key != "p/" || !strings.Contains(err.Error(), tc.refusal) {
			t.Errorf("%s: Follow = %v, want an OpError (follow, p/) saying %q", tc.name, err, tc.refusal)
		}
		if tc.closed && tc.refusal == errClosed.Error() && !errors.Is(err, errClosed) {
			t.Errorf("%s: Follow = %v, want it to wrap ErrClosed", tc.name, err)
		}
	}
}

// TestGateList: a closed store before a bad limit, a bad limit of an open
// store, each an OpError of op "list" and the prefix; a good limit passes.
func TestGateList(t *testing.T) {
	closed := true
	g := gateOver(&closed)
	var op *driver.OpError
	if err := g.List("p/", 0); !errors.Is(err, errClosed) || !errors.As(err, &op) || op.Op != "list" || op.Key != "p/" {
		t.Errorf("closed: List = %v, want an OpError (list, p/) wrapping ErrClosed", err)
	}
	closed = false
	if err := g.List("p/", 0); !errors.As(err, &op) || op.Op != "list" || !strings.Contains(err.Error(), "limit 0 ") {
		t.Errorf("open, limit 0: List = %v, want an OpError (list) naming the limit", err)
	}
	if err := g.List("p/", 1); err != nil {
		t.Errorf("open, limit 1: List = %v, want nil", err)
	}
}

// TestResyncChecksFirst: Follow refuses a bad call and an ended context
// without a session; the control, a good call, runs one.
func TestResyncChecksFirst(t *testing.T) {
	sessions := 0
	closed := false
	r := adapter.Resync{
		Gate: gateOver(&closed),
		Session: func(context.Context) (bool, bool, error) {
			sessions++
			closed = true // the next check ends Follow
			return false, false, errBroken
		},
		Refused: func(error) bool { return false },
		Wrap:    bare,
	}
	fn := func(driver.Change) {}
	if err := r.Follow(t.Context(), "p/", 0, false, nil, fn); err == nil || sessions != 0 {
		t.Errorf("zero heartbeat: Follow = %v after %d sessions, want a refusal and none", err, sessions)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := r.Follow(ctx, "p/", time.Second, false, nil, fn); err != context.Canceled || sessions != 0 {
		t.Errorf("ended context: Follow = %v after %d sessions, want context.Canceled as it is and none", err, sessions)
	}
	if err := r.Follow(t.Context(), "p/", time.Second, false, nil, fn); !errors.Is(err, errClosed) || sessions != 1 {
		t.Errorf("good call: Follow = %v after %d sessions, want the closed error after 1", err, sessions)
	}
}

// TestResyncDefaultBackoff: a Resync without a Backoff waits 10 ms after
// the first failed session, doubling up to 1 s (the control for the
// bound: the waits do grow, so a Backoff that never waited would fail).
func TestResyncDefaultBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var starts []time.Time
		closed := false
		r := adapter.Resync{
			Gate: gateOver(&closed),
			Session: func(context.Context) (bool, bool, error) {
				starts = append(starts, time.Now())
				closed = len(starts) == 10
				return false, false, errBroken
			},
			Refused: func(error) bool { return false },
			Wrap:    bare,
		}
		if err := r.Follow(t.Context(), "p/", time.Second, false, nil, func(driver.Change) {}); !errors.Is(err, errClosed) {
			t.Fatalf("Follow = %v, want the closed error", err)
		}
		var waits []string
		for i := 1; i < len(starts); i++ {
			waits = append(waits, starts[i].Sub(starts[i-1]).String())
		}
		if got, want := fmt.Sprint(waits), "[10ms 20ms 40ms 80ms 160ms 320ms 640ms 1s 1s]"; got != want {
			t.Errorf("waits between sessions %s, want %s", got, want)
		}
	})
}
