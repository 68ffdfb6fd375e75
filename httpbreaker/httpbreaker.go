// Package httpbreaker puts a kvbreaker.Breaker in front of an http.Client,
// one circuit per host, as an http.RoundTripper:
//
//	client := &http.Client{Transport: &httpbreaker.Transport{Breaker: b}}
//
// Each request asks the Breaker first (the host key is kvbreaker.HostKey of
// the request URL). Send and Probe forward the request to the base transport;
// Hold returns a *HeldError (errors.Is(err, kvbreaker.ErrHeld)) without
// touching the network; Drop returns a *DroppedError (errors.Is(err,
// ErrDropped)). The outcome is recorded once, when the response headers
// arrive or the round trip fails; response bodies are passed on untouched, so
// streaming works.
//
// A held message's first-hold instant travels in the request context: pass
// HeldError.HeldSince to WithHeldSince when retrying, so the Breaker's
// HoldLimit can drop it in the end.
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
)

// Outcome is what a round trip says about its host.
type Outcome int8

const (
	// Success: the host answered as hoped (2xx, 3xx by default); the
	// circuit closes.
	Success Outcome = iota
	// ReachableFailure: the host answered, so it is up, but the request
	// failed (4xx by default, 429 included); the circuit closes.
	ReachableFailure
	// Failure: the host did not answer usefully (connection error, timeout,
	// 5xx by default); it counts towards opening the circuit.
	Failure
	// Ignore: record nothing.
	Ignore
)

// String returns "success", "reachable-failure", "failure" or "ignore".
func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case ReachableFailure:
		return "reachable-failure"
	case Failure:
		return "failure"
	case Ignore:
		return "ignore"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// DefaultClassify is the classification a Transport uses when its Classify
// is nil:
//   - a round-trip error (refused connection, reset, TLS failure, timeout,
//     an expired request deadline) is a Failure;
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
func DefaultClassify(resp *http.Response, err error) Outcome {
	if err != nil || resp == nil {
		return Failure
	}
	switch {
	case resp.StatusCode >= 500:
		return Failure
	case resp.StatusCode >= 400:
		return ReachableFailure
	default:
		return Success
	}
}

// ErrNoBreaker is returned by a Transport whose Breaker is nil.
var ErrNoBreaker = errors.New("httpbreaker: Transport.Breaker is nil")

// ErrDropped is matched by the *DroppedError a Transport returns when the
// Breaker drops a message held for its HoldLimit.
var ErrDropped = errors.New("httpbreaker: request dropped: held for the hold limit")

// DroppedError says a request was given up: it had been held since
// HeldSince, for the Breaker's HoldLimit. It does not match kvbreaker.ErrHeld,
// so a caller that retries held requests does not retry it.
type DroppedError struct {
	Host      string
	HeldSince time.Time
}

func (e *DroppedError) Error() string {
	return fmt.Sprintf("httpbreaker: request to %q dropped: held since %s, for the hold limit",
		e.Host, e.HeldSince.Format(time.RFC3339Nano))
}

// Is matches ErrDropped.
func (e *DroppedError) Is(target error) bool { return target == ErrDropped }

// HeldError says a request was not sent because its host's circuit is open
// or half-open with a probe in flight. It unwraps to the *kvbreaker.HeldError
// (so errors.Is(err, kvbreaker.ErrHeld) holds) and carries the instant to
// retry at and the first-hold instant to pass to WithHeldSince when
// retrying.
type HeldError struct {
	Held *kvbreaker.HeldError
	// HeldSince is Verdict.HeldSince: when this message was first held.
	HeldSince time.Time
}

func (e *HeldError) Error() string { return "httpbreaker: " + e.Held.Error() }

// Unwrap returns the *kvbreaker.HeldError.
func (e *HeldError) Unwrap() error { return e.Held }

// RetryAt is when to ask again.
func (e *HeldError) RetryAt() time.Time { return e.Held.RetryAt }

type heldSinceKey struct{}

// WithHeldSince returns ctx carrying t, the instant a message was first held
// (HeldError.HeldSince), for the Transport to pass to Breaker.Allow: without
// it, every retry counts as a fresh message and HoldLimit never drops it.
func WithHeldSince(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, heldSinceKey{}, t)
}

// HeldSince returns the instant WithHeldSince put in ctx, or zero.
func HeldSince(ctx context.Context) time.Time {
	t, _ := ctx.Value(heldSinceKey{}).(time.Time)
	return t
}

// RetryAfter parses resp's Retry-After header (delay in seconds or an HTTP
// date) into an instant, now plus the delay for the seconds form. It reports
// false when resp is nil or the header is absent or invalid. A Transport
// returns 429 and 503 responses as they are (a RoundTripper must); call
// RetryAfter on them to learn when the host asks to be retried.
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
	// DefaultClassify. It is not called for a request whose context was
	// cancelled (context.Canceled): that is the caller's choice, not the
	// host's failure, and nothing is recorded. An expired deadline (the
	// client's Timeout included) is the host being slow: it is classified.
	Classify func(*http.Response, error) Outcome
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
	v, storeErr := t.Breaker.Allow(ctx, host, HeldSince(ctx))
	switch v.Decision {
	case kvbreaker.Hold:
		closeBody(req) // RoundTrip must close it, even when not sending.
		return nil, join(&HeldError{
			Held:      &kvbreaker.HeldError{Host: host, Decision: v.Decision, RetryAt: v.RetryAt},
			HeldSince: v.HeldSince,
		}, storeErr)
	case kvbreaker.Drop:
		closeBody(req)
		return nil, join(&DroppedError{Host: host, HeldSince: v.HeldSince}, storeErr)
	}
	resp, rtErr := base.RoundTrip(req)
	var recErr error
	if !errors.Is(storeErr, kvbreaker.ErrInvalidKey) {
		recErr = t.record(req, host, resp, rtErr)
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

func (t *Transport) record(req *http.Request, host string, resp *http.Response, rtErr error) error {
	ctx := req.Context()
	if rtErr != nil && errors.Is(context.Cause(ctx), context.Canceled) {
		return nil
	}
	classify := t.Classify
	if classify == nil {
		classify = DefaultClassify
	}
	// The request's context may have expired (a timeout is still recorded);
	// the Breaker bounds the store call with its CallTimeout.
	rctx := context.WithoutCancel(ctx)
	switch classify(resp, rtErr) {
	case Success:
		return t.Breaker.Success(rctx, host)
	case ReachableFailure:
		return t.Breaker.ReachableFailure(rctx, host)
	case Failure:
		return t.Breaker.Failure(rctx, host)
	}
	return nil
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
