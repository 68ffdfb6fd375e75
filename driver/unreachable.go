package driver

import (
	"errors"
	"strings"
)

// ErrUnreachable is matched (errors.Is) by the error of a call that could
// not reach the store: no connection could be made (refused, a name that
// does not resolve, a unix socket that does not exist), so nothing was
// sent; etcd's client retries connections until the call's context ends,
// so its calls report that case with an error matching the context's error
// too. An adapter's Dial may also report a server that accepted the
// connection but never answered its first request this way (etcd's and
// redis's do, and say so); a call on a working Store whose server goes
// silent instead ends with its context. Every backend's ErrUnreachable is
// this error, so one errors.Is covers them all.
var ErrUnreachable = errors.New("kvbreaker: store unreachable")

// UnreachableError says where and why a store could not be reached:
// "cannot reach etcd at http://127.0.0.1:2379: connection refused". It
// matches ErrUnreachable and unwraps to the cause; adapters return it as
// the cause of a *OpError.
type UnreachableError struct {
	// Backend names the store as the message does: "etcd", "dynamodb",
	// "Workers KV", "redis", "postgres".
	Backend string
	// Endpoints are where the adapter tried (URLs, host:port or a socket's
	// path), without credentials.
	Endpoints []string
	// Reason is the cause in a few words ("connection refused":
	// adapter.DialReason shortens a failed dial's error to them); empty
	// means Err's own text.
	Reason string
	// Err is the cause: the dial error(s), or a context's error.
	Err error
}

func (e *UnreachableError) Error() string {
	reason := e.Reason
	if reason == "" && e.Err != nil {
		reason = e.Err.Error()
	}
	return "cannot reach " + e.Backend + " at " + strings.Join(e.Endpoints, ", ") + ": " + reason
}

// Is reports whether target is ErrUnreachable.
func (e *UnreachableError) Is(target error) bool { return target == ErrUnreachable }

// Unwrap returns the cause.
func (e *UnreachableError) Unwrap() error { return e.Err }
