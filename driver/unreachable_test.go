package driver_test

import (
	"context"
	"errors"
	"testing"

	"github.com/kvbreaker/kvbreaker/driver"
)

// TestUnreachableReason: a Reason given wins over the cause's (a Dial that
// was accepted but not answered says so), endpoints are listed in order,
// and the context's error stays matchable.
func TestUnreachableReason(t *testing.T) {
	ue := &driver.UnreachableError{
		Backend:   "etcd",
		Endpoints: []string{"http://10.0.0.1:2379", "http://10.0.0.2:2379"},
		Reason:    "it accepted the connection but did not answer within 5s",
		Err:       context.DeadlineExceeded,
	}
	want := "cannot reach etcd at http://10.0.0.1:2379, http://10.0.0.2:2379: it accepted the connection but did not answer within 5s"
	if ue.Error() != want {
		t.Errorf("Error() = %q, want %q", ue, want)
	}
	if !errors.Is(ue, driver.ErrUnreachable) || !errors.Is(ue, context.DeadlineExceeded) {
		t.Errorf("%v does not match ErrUnreachable and DeadlineExceeded", ue)
	}
}

// TestUnreachableNoReason: without a Reason, the message ends with the
// cause's own text.
func TestUnreachableNoReason(t *testing.T) {
	ue := &driver.UnreachableError{Backend: "nats", Endpoints: []string{"127.0.0.1:4222"}, Err: errors.New("nats: no servers available for connection")}
	if want := "cannot reach nats at 127.0.0.1:4222: nats: no servers available for connection"; ue.Error() != want {
		t.Errorf("Error() = %q, want %q", ue, want)
	}
}
