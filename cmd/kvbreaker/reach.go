package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// dialTimeout bounds the first TCP connection to an endpoint, as a store's
// own command-line client's dial timeout does: a closed port or a dead host is reported within it,
// not after the command's --timeout.
const dialTimeout = 2 * time.Second

// unreachable is the error of a backend's server that could not be reached
// or did not answer: "cannot reach BACKEND at ENDPOINT: connection refused",
// the adapters' own *driver.UnreachableError.
func unreachable(backend, endpoint, why string, err error) error {
	return &driver.UnreachableError{Backend: backend, Endpoints: []string{endpoint}, Reason: why, Err: err}
}

// preflight opens (and closes) a TCP connection to each endpoint URL's host
// and port within dialTimeout, and fails only if none accepts. SDK clients
// retry a refused connection until their deadline (a gRPC client for its
// whole dial timeout); this answers the common case, a wrong port or a
// server that is down, at once and in words.
func preflight(ctx context.Context, backend string, endpoints ...string) error {
	var errs []error
	for _, ep := range endpoints {
		u, err := url.Parse(ep)
		if err != nil || u.Host == "" {
			return fmt.Errorf("%q is not a URL", redactURL(ep))
		}
		// A URL without a port: its scheme's (NATS's 4222, HTTP's 80).
		port := map[string]string{"http": "80", "nats": "4222", "tls": "4222"}[u.Scheme]
		addr := net.JoinHostPort(u.Hostname(), cmp.Or(u.Port(), port, "443"))
		if err = adapter.CheckDial(ctx, backend, "tcp", addr, dialTimeout); err == nil {
			return nil
		}
		if port != "4222" { // NATS's messages name host:port, as nats.go does
			err.(*driver.UnreachableError).Endpoints[0] = redactURL(ep)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// noAnswer translates the failure of a connection's first request: when
// ctx ended (the server accepted the connection but never answered) it
// says which bound gave up; otherwise err stands. An endpoint of "" is the
// one err's *driver.UnreachableError names.
func noAnswer(ctx context.Context, backend, endpoint, bound string, err error) error {
	if ctx.Err() == nil {
		return err
	}
	if ue, ok := errors.AsType[*driver.UnreachableError](err); ok && endpoint == "" {
		endpoint = strings.Join(ue.Endpoints, ", ")
	}
	return unreachable(backend, endpoint, "no answer within "+bound, err)
}
