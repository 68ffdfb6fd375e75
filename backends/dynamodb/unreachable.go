package dynamodb

import (
	"context"
	"errors"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// cause turns the SDK's error into the cause an OpError carries: an
// *driver.UnreachableError when no connection could be made, an
// *adapter.NoAnswerError when the context ended while a request was out,
// and otherwise err itself.
func (s *Store) cause(err error) error {
	if dial, ok := adapter.DialFailed(err); ok {
		return &driver.UnreachableError{Backend: "dynamodb", Endpoints: []string{s.endpointOf(err)}, Reason: adapter.DialReason(dial), Err: dial}
	}
	// The SDK reports a request the context ended as a
	// *smithy.CanceledError (not a *url.Error).
	if _, sent := errors.AsType[*smithy.CanceledError](err); sent &&
		(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return &adapter.NoAnswerError{Name: "dynamodb", Endpoint: s.endpointOf(err), Err: err}
	}
	return err
}

// endpointOf returns the scheme and host of the URL err was about, or the
// client's endpoint.
func (s *Store) endpointOf(err error) string {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
			return u.Scheme + "://" + u.Host
		}
	}
	return s.endpoint
}

// failFastRetryer is the client's retryer, except that a call whose
// connection was refused (or whose endpoint does not resolve) is not
// retried: nothing was sent, so no retry can resolve an ambiguous outcome,
// and the standard retryer's backoffs (up to 1 s, then 2 s) would only
// delay an answer the caller needs at once (a command against a wrong
// endpoint, a Breaker within its CallTimeout).
type failFastRetryer struct{ aws.Retryer }

func (r failFastRetryer) IsErrorRetryable(err error) bool {
	if _, ok := adapter.DialFailed(err); ok {
		return false
	}
	return r.Retryer.IsErrorRetryable(err)
}

// GetAttemptToken is aws.RetryerV2's, passed through as the SDK does for a
// retryer without it.
func (r failFastRetryer) GetAttemptToken(ctx context.Context) (func(error) error, error) {
	if v2, ok := r.Retryer.(aws.RetryerV2); ok {
		return v2.GetAttemptToken(ctx)
	}
	return r.GetInitialToken(), nil
}
