package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// dialTimeout bounds the first TCP connection to an endpoint, as a store's
// own command-line client's dial timeout does: a closed port or a dead host is reported within it,
// not after the command's --timeout.
const dialTimeout = 2 * time.Second

// reachError says a backend's server could not be reached or did not
// answer: "cannot reach BACKEND at ENDPOINT: connection refused".
type reachError struct {
	backend, endpoint string
	// why is the cause in a few words: "connection refused", "no answer
	// within --timeout 3s".
	why string
	err error
}

func (e *reachError) Error() string {
	return fmt.Sprintf("cannot reach %s at %s: %s", e.backend, e.endpoint, e.why)
}

func (e *reachError) Unwrap() error { return e.err }

// preflight opens (and closes) a TCP connection to each endpoint, within
// dialTimeout, and fails only if none accepts. SDK clients retry a refused
// connection until their deadline (a gRPC client for its whole dial
// timeout); this answers the common case, a wrong port or a server that is
// down, at once and in words.
func preflight(ctx context.Context, backend string, endpoints ...string) error {
	var errs []error
	for _, ep := range endpoints {
		addr, err := hostPort(ep)
		if err != nil {
			return err
		}
		err = dialCheck(ctx, backend, "tcp", addr)
		if err == nil {
			return nil
		}
		err.(*reachError).endpoint = redactURL(ep)
		errs = append(errs, err)
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// dialCheck opens (and closes) a connection to addr within dialTimeout:
// nil, or the *reachError that says why it failed.
func dialCheck(ctx context.Context, backend, network, addr string) error {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(dctx, network, addr)
	if err != nil {
		return &reachError{backend: backend, endpoint: addr, why: dialCause(err), err: err}
	}
	return c.Close()
}

// hostPort is the address a URL's client connects to.
func hostPort(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("%q is not a URL", redactURL(raw))
	}
	if u.Port() != "" {
		return u.Host, nil
	}
	port := "443"
	if u.Scheme == "http" {
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// dialCause says why a dial failed, in the words an operator searches for.
func dialCause(err error) string {
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return "no such host " + dnsErr.Name
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Sprintf("no connection within %v (dial timeout)", dialTimeout)
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	return msg
}

// noAnswer translates the failure of a connection's first request: when
// ctx ended (the server accepted the connection but never answered) it
// says which bound gave up; otherwise err stands.
func noAnswer(ctx context.Context, backend, endpoint, bound string, err error) error {
	if ctx.Err() == nil {
		return err
	}
	return &reachError{backend: backend, endpoint: endpoint, why: "no answer within " + bound, err: err}
}
