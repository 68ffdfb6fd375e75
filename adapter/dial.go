package adapter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// DefaultDialTimeout bounds a Dial (etcd's, NATS's, Redis's) whose context
// has no deadline: it waits for the server's first answer, and a server
// that accepts connections but does not answer would otherwise hold it for
// ever (DialContext).
const DefaultDialTimeout = 5 * time.Second

// DialContext is ctx for a constructor that waits for its server: ctx
// itself when it has a deadline (the caller's bound, longer or shorter),
// else ctx bounded by timeout (DefaultDialTimeout for a Dial). Call cancel
// when the constructor returns; the store's later life is not bound by it.
func DialContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, timeout)
}

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
	why := DialReason(err)
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		why = fmt.Sprintf("no connection within %v (dial timeout)", timeout)
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		why = "host unreachable"
	}
	return &driver.UnreachableError{Backend: backend, Endpoints: []string{addr}, Reason: why, Err: err}
}

// CheckHTTPURL checks, without connecting, that rawURL is an http:// or
// https:// URL with a host, as CheckDialURL wants it: for a tool that
// validates an endpoint's setting before it dials.
func CheckHTTPURL(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want an http:// or https:// URL")
	}
	return nil
}

// CheckDialURL is CheckDial to the host and port of an http:// or https://
// URL (80 or 443 when it names none), for an adapter whose client takes a
// URL (an endpoint override, an API's base URL). Its error names the URL
// without user information, query or fragment, which may carry a
// credential.
func CheckDialURL(ctx context.Context, backend, rawURL string, timeout time.Duration) error {
	if err := CheckHTTPURL(rawURL); err != nil {
		return fmt.Errorf("%s: %w, not %q", backend, err, ShownURL(rawURL))
	}
	u, _ := url.Parse(rawURL)
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	err := CheckDial(ctx, backend, "tcp", net.JoinHostPort(u.Hostname(), port), timeout)
	if ue, ok := err.(*driver.UnreachableError); ok {
		ue.Endpoints[0] = ShownURL(rawURL)
	}
	return err
}

// ShownURL is rawURL as a message may show it: scheme, host, port and
// path, without user information, query or fragment.
func ShownURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return "(a URL that does not parse)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// DialFailed returns the dial error within err if err says that no
// connection could be made, so nothing was sent: a refused connection, a
// unix socket that does not exist, or a name that does not resolve. A dial
// that timed out is not one: the server may be slow rather than absent,
// and bounding that is the caller's context's job.
func DialFailed(err error) (dial error, ok bool) {
	if op, ok := errors.AsType[*net.OpError](err); ok && op.Op == "dial" &&
		(errors.Is(op, syscall.ECONNREFUSED) || errors.Is(op, syscall.ENOENT)) {
		return op, true
	}
	if dns, ok := errors.AsType[*net.DNSError](err); ok && dns.IsNotFound {
		return dns, true
	}
	return nil, false
}

// DialReason is a failed dial's cause as an operator reads it: "connection
// refused" rather than "dial tcp 127.0.0.1:2379: connect: connection
// refused", "no such host db.example" rather than the resolver's whole
// answer, "no such socket" for a unix socket that does not exist; for
// another *net.OpError its inner error, otherwise err's own text.
func DialReason(err error) string {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return syscall.ECONNREFUSED.Error()
	}
	if errors.Is(err, syscall.ENOENT) {
		return "no such socket"
	}
	if dns, ok := errors.AsType[*net.DNSError](err); ok && dns.IsNotFound {
		return "no such host " + dns.Name
	}
	if op, ok := errors.AsType[*net.OpError](err); ok && op.Err != nil {
		return op.Err.Error()
	}
	if err == nil {
		return "unknown cause"
	}
	return err.Error()
}
