package cloudflarekv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
)

// ErrUnreachable is matched (errors.Is) by the error of a call whose request
// could not reach the Cloudflare API at all: the connection was refused or
// the API's name did not resolve. Nothing was sent. An *UnreachableError
// says where.
var ErrUnreachable = errors.New("cloudflarekv: API unreachable")

// UnreachableError is a request that reached no server: "cannot reach
// Workers KV at <endpoint>: connection refused".
type UnreachableError struct {
	Endpoint string // scheme://host of the API, as dialled
	Err      error  // the dial error (a *net.OpError or *net.DNSError)
}

func (e *UnreachableError) Error() string {
	return "cannot reach Workers KV at " + e.Endpoint + ": " + reason(e.Err)
}

// Unwrap returns the dial error.
func (e *UnreachableError) Unwrap() error { return e.Err }

// Is matches ErrUnreachable.
func (e *UnreachableError) Is(target error) bool { return target == ErrUnreachable }

// reason is the short cause of a dial error: "connection refused" rather
// than "dial tcp 127.0.0.1:8787: connect: connection refused".
func reason(err error) string {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return syscall.ECONNREFUSED.Error()
	}
	if dns, ok := errors.AsType[*net.DNSError](err); ok && dns.IsNotFound {
		return "no such host " + dns.Name
	}
	return err.Error()
}

// dialFailed returns the dial error if err says that no connection could be
// made: refused, or a name that does not exist. A silent endpoint (no
// answer, a dial that hangs) is the timeouts' to bound, not this.
func dialFailed(err error) (error, bool) {
	if err == nil {
		return nil, false
	}
	if op, ok := errors.AsType[*net.OpError](err); ok && op.Op == "dial" && errors.Is(op, syscall.ECONNREFUSED) {
		return op, true
	}
	if dns, ok := errors.AsType[*net.DNSError](err); ok && dns.IsNotFound {
		return dns, true
	}
	return nil, false
}

// notSent carries an *UnreachableError through cloudflare-go's retry loop,
// which retries every transport error except a context's: it matches
// context.Canceled for that loop alone, and apiError unwraps it before
// anyone else sees it. A refused connection sent nothing, so a retry (1.5
// to 2 s later) could only delay the answer.
type notSent struct{ err *UnreachableError }

func (e *notSent) Error() string { return e.err.Error() }

func (e *notSent) Is(target error) bool { return target == context.Canceled }

// failFast is the request middleware that records the API's endpoint (for
// errors) and turns a failed dial into notSent.
func (s *Store) failFast(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	if s.endpoint.Load() == nil {
		ep := req.URL.Scheme + "://" + req.URL.Host
		s.endpoint.CompareAndSwap(nil, &ep)
	}
	res, err := next(req)
	if dial, ok := dialFailed(err); ok {
		return res, &notSent{&UnreachableError{Endpoint: req.URL.Scheme + "://" + req.URL.Host, Err: dial}}
	}
	return res, err
}

// endpointName is the API's scheme://host for messages.
func (s *Store) endpointName() string {
	if ep := s.endpoint.Load(); ep != nil {
		return *ep
	}
	return "the Cloudflare API"
}

// noAnswer says that a caller's context ended while the store's request
// was out: "no answer from Workers KV at <endpoint> before the context
// ended: context deadline exceeded". It matches the context's error.
func (s *Store) noAnswer(ctxErr error) error {
	return fmt.Errorf("no answer from Workers KV at %s before the context ended: %w", s.endpointName(), ctxErr)
}

// sending reports whether p (or the op it was folded into) is in flight
// for key full.
func (s *Store) sending(full string, p *op) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p.next != nil {
		p = p.next
	}
	st := s.keys[full]
	return st != nil && st.inflight == p
}
