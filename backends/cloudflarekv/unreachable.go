package cloudflarekv

import (
	"context"
	"net/http"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// notSent carries an *driver.UnreachableError through cloudflare-go's retry loop,
// which retries every transport error except a context's: it matches
// context.Canceled for that loop alone, and apiError unwraps it before
// anyone else sees it. A refused connection sent nothing, so a retry (1.5
// to 2 s later) could only delay the answer.
type notSent struct{ err *driver.UnreachableError }

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
	if dial, ok := adapter.DialFailed(err); ok {
		return res, &notSent{&driver.UnreachableError{Backend: "Workers KV", Endpoints: []string{req.URL.Scheme + "://" + req.URL.Host}, Reason: adapter.DialReason(dial), Err: dial}}
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
	return &adapter.NoAnswerError{Name: "Workers KV", Endpoint: s.endpointName(), Err: ctxErr}
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
