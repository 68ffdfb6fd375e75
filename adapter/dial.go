package adapter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// CheckDial opens (and closes) one connection to addr over network ("tcp",
// "unix") within timeout, and returns nil or the *driver.UnreachableError
// that says, in an operator's words, why it failed: "connection refused",
// "no such host db.example", "no connection within 2s (dial timeout)",
// "host unreachable". A pool or an SDK client retries a refused connection
// until its caller's deadline; a constructor (or a command) that calls this
// first reports the common case, a wrong port or a server that is down, at
// once and in words.
func CheckDial(ctx context.Context, backend, network, addr string, timeout time.Duration) error {
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(dctx, network, addr)
	if err == nil {
		return c.Close()
	}
	var netErr net.Error
	why := driver.DialReason(err)
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		why = fmt.Sprintf("no connection within %v (dial timeout)", timeout)
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		why = "host unreachable"
	}
	return &driver.UnreachableError{Backend: backend, Endpoints: []string{addr}, Reason: why, Err: err}
}
