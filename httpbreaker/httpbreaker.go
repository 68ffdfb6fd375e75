// Package httpbreaker puts a kvbreaker.Breaker in front of an http.Client,
// one circuit per host, as an http.RoundTripper:
//
//	client := &http.Client{Transport: &httpbreaker.Transport{Breaker: b}}
//
// Each request asks the Breaker first (the host key is kvbreaker.HostKey of
// the request URL). Send and Probe forward the request to the base transport;
// Hold and Drop return a *kvbreaker.HeldError without touching the network,
// matching kvbreaker.ErrHeld for a Hold and kvbreaker.ErrDropped for a Drop.
// The outcome is recorded once, when the response headers arrive or the
// round trip fails; response bodies are passed on untouched, so streaming
// works.
//
// Outcomes follow kvbreaker.Classify, the rule Breaker.Do uses: a request
// whose context was cancelled (whatever the cause: an errgroup sibling's
// failure, a signal, a shutdown) records nothing, and a probe cancelled that
// way has its claim released (kvbreaker.Breaker.Abandon) so another worker
// may probe at once; an expired deadline, the client's Timeout included, is
// a Failure, since a host that never answers shows itself only as timeouts.
// Otherwise Transport.Classify maps the response.
//
// A held message's first-hold instant travels in the request context: pass
// HeldError.HeldSince to kvbreaker.WithHeldSince when retrying, so the
// Breaker's HoldLimit can drop it in the end.
//
// Through an http.Client the *kvbreaker.HeldError arrives wrapped in a
// *url.Error, which errors.As and errors.Is look through:
// errors.AsType[*kvbreaker.HeldError](err) gives it, and
// errors.Is(err, kvbreaker.ErrHeld) tells a hold from a failure. A Hold
// closes the request's body, as a RoundTripper must, so a request with a
// body (a POST) is retried as RetryRequest makes it: a clone carrying the
// first hold's instant, its body replayed by GetBody (set by
// http.NewRequest for a *bytes.Reader, *bytes.Buffer or *strings.Reader
// body).
//
// A retrying client goes over the Transport, not under it as Base: over,
// every attempt asks the Breaker, each failed one counts towards opening
// the circuit, and once it opens the next attempt is held at once, so the
// retry loop must stop on kvbreaker.ErrHeld (or ErrDropped) and leave the
// message to the queue, at RetryAt. Under it, the Breaker sees one outcome
// per request whatever the retries did: attempts go on against a host the
// fleet already knows is down, and a request that succeeded on its third
// try records no failure.
//
// A 429 or 503 response's Retry-After does not change the breaker's
// restraint, neither shortening nor extending it. The restraint is shared by
// every worker of the fleet and keyed by host, whereas a Retry-After answers
// one request from one client: a 429 is often a per-client or per-account
// rate limit, and a restraint shortened to it would let every worker probe
// early. Schedule that message's retry with RetryAfter instead; an open
// circuit stays restrained for RecoveryDelay whatever Retry-After says.
package httpbreaker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
)

// DefaultClassify is the classification a Transport uses when its Classify
// is nil:
//   - a round-trip error (refused connection, reset, TLS failure, timeout,
//     an expired request deadline) is a Failure, unless the base transport
//     marked it with kvbreaker.Reachable: the errors are classified as
//     kvbreaker.Classify classifies them;
//   - 5xx is a Failure, 503 with Retry-After included: the host says it
//     cannot serve;
//   - 429 and the other 4xx are a ReachableFailure: the host answered, so it
//     is alive. 429 in particular means the host is rate-limiting us, not
//     down; counting it as a Failure would open the circuit for
//     RecoveryDelay (30 min by default) on a host that asked to wait a few
//     seconds. Honour its Retry-After with RetryAfter instead;
//   - 1xx, 2xx and 3xx are a Success.
//
// A request whose context was cancelled never reaches Classify (see
// Transport).
func DefaultClassify(resp *http.Response, err error) kvbreaker.Outcome {
	switch {
	case err != nil:
		// No context here: RoundTrip applies the cancellation rule first.
		return kvbreaker.Classify(context.Background(), err)
	case resp == nil:
		return kvbreaker.Failure
	case resp.StatusCode >= 500:
		return kvbreaker.Failure
	case resp.StatusCode >= 400:
		return kvbreaker.ReachableFailure
	}
	return kvbreaker.Success
}

// ErrNoBody is returned by RetryRequest for a request whose body cannot be
// replayed.
var ErrNoBody = errors.New("httpbreaker: the request's body cannot be replayed: it has no GetBody (build it with http.NewRequest over a *bytes.Reader, *bytes.Buffer or *strings.Reader, or set GetBody)")

// RetryRequest returns the request to send when req was held: a clone of
// req whose context carries held.HeldSince (kvbreaker.WithHeldSince, so
// HoldLimit counts from the first hold) and whose body is a fresh copy from
// req.GetBody, since the Transport closed req's body. It fails with
// ErrNoBody when req has a body and no GetBody. A signed request (an HTTP
// signature's Date and Digest) must be signed again on the clone: a
// receiver refuses a signature older than it accepts.
func RetryRequest(req *http.Request, held *kvbreaker.HeldError) (*http.Request, error) {
	ctx := req.Context()
	if held != nil && !held.HeldSince.IsZero() {
		ctx = kvbreaker.WithHeldSince(ctx, held.HeldSince)
	}
	r := req.Clone(ctx)
	if req.Body == nil || req.Body == http.NoBody {
		return r, nil
	}
	if req.GetBody == nil {
		return nil, ErrNoBody
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, fmt.Errorf("httpbreaker: replaying the request's body: %w", err)
	}
	r.Body = body
	return r, nil
}

// ErrNoBreaker is returned by a Transport whose Breaker is nil.
var ErrNoBreaker = errors.New("httpbreaker: Transport.Breaker is nil")

// RetryAfter parses resp's Retry-After header (delay in seconds or an HTTP
// date) into an instant, now plus the delay for the seconds form. It reports
// false when resp is nil or the header is absent or invalid. A Transport
// returns 429 and 503 responses as they are (a RoundTripper must); call
// RetryAfter on them to learn when the host asks that request to be
// retried. The Breaker's restraint does not follow it (see the package
// documentation).
func RetryAfter(resp *http.Response, now time.Time) (time.Time, bool) {
	if resp == nil {
		return time.Time{}, false
	}
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return time.Time{}, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return time.Time{}, false
		}
		return now.Add(time.Duration(secs) * time.Second), true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// Transport is an http.RoundTripper that asks Breaker before each request
// and records each outcome. It is safe for concurrent use; many Transports
// (in one process or many) may share one Breaker's store.
//
// Errors from the Breaker's store never cost the request: Allow's fail-open
// answer (Send) is followed, and the store error is joined after the round
// trip's own error when the round trip fails, or passed to OnStoreError when
// a response is returned (a RoundTripper cannot return both).
type Transport struct {
	// Base performs the requests. Nil means http.DefaultTransport.
	Base http.RoundTripper
	// Breaker decides and records. It must not be nil.
	Breaker *kvbreaker.Breaker
	// Classify maps a round trip's result to an Outcome. Nil means
	// DefaultClassify. It is not called for a request that failed once its
	// context was cancelled (ctx.Err() is context.Canceled, whatever
	// context.Cause says): kvbreaker.Classify makes that Ignore, the
	// caller's choice and not the host's failure. An expired deadline (the
	// client's Timeout included) is the host being slow: it is classified.
	// Ignore records nothing; for a probe it also releases the claim.
	Classify func(*http.Response, error) kvbreaker.Outcome
	// OnStoreError receives store errors that could not be returned with
	// the response. Nil means a warning through slog.Default().
	OnStoreError func(host string, err error)
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if t.Breaker == nil {
		closeBody(req)
		return nil, ErrNoBreaker
	}
	if req.URL == nil {
		return base.RoundTrip(req)
	}
	host, err := kvbreaker.HostKey(req.URL.Scheme + "://" + req.URL.Host)
	if err != nil {
		// The breaker cannot track this host; let the base transport
		// answer (it will most likely reject the URL itself).
		return base.RoundTrip(req)
	}
	ctx := req.Context()
	v, storeErr := t.Breaker.Allow(ctx, host, kvbreaker.HeldSince(ctx))
	if v.Decision == kvbreaker.Hold || v.Decision == kvbreaker.Drop {
		closeBody(req) // RoundTrip must close it, even when not sending.
		return nil, join(&kvbreaker.HeldError{Host: host, Decision: v.Decision, RetryAt: v.RetryAt, HeldSince: v.HeldSince}, storeErr)
	}
	resp, rtErr := base.RoundTrip(req)
	var recErr error
	if !errors.Is(storeErr, driver.ErrInvalidKey) {
		recErr = t.record(ctx, host, v, resp, rtErr)
	}
	if rtErr != nil {
		// The request's own error first: callers match it, and read it.
		return nil, join(rtErr, storeErr, recErr)
	}
	if e := errors.Join(storeErr, recErr); e != nil {
		t.storeError(host, e)
	}
	return resp, nil
}

// record stores the round trip's outcome: kvbreaker.Classify's, when the
// request's context was cancelled, Classify's otherwise.
func (t *Transport) record(ctx context.Context, host string, v kvbreaker.Verdict, resp *http.Response, rtErr error) error {
	o := kvbreaker.Classify(ctx, rtErr)
	if o != kvbreaker.Ignore {
		classify := t.Classify
		if classify == nil {
			classify = DefaultClassify
		}
		o = classify(resp, rtErr)
	}
	// The request's context may have ended (a timeout is still recorded, a
	// cancelled probe still released); the Breaker bounds the store call
	// with its CallTimeout.
	rctx := context.WithoutCancel(ctx)
	if o == kvbreaker.Ignore {
		if v.Decision == kvbreaker.Probe {
			return t.Breaker.Abandon(rctx, host, v)
		}
		return nil
	}
	return t.Breaker.Record(rctx, host, o)
}

// join returns err itself when there is nothing to add: errors.Join would
// hide its methods (a timeout's Timeout() bool, which url.Error and
// net.Error callers rely on).
func join(err error, more ...error) error {
	if errors.Join(more...) == nil {
		return err
	}
	return errors.Join(append([]error{err}, more...)...)
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

func (t *Transport) storeError(host string, err error) {
	if t.OnStoreError != nil {
		t.OnStoreError(host, err)
		return
	}
	slog.Default().Warn("httpbreaker: breaker store error; the request went ahead", "host", host, "err", err)
}
