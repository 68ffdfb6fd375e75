package driver

import (
	"errors"
	"net"
	"strings"
	"syscall"
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
	// Reason is the cause in a few words ("connection refused"); empty
	// means DialReason(Err).
	Reason string
	// Err is the cause: the dial error(s), or a context's error.
	Err error
}

func (e *UnreachableError) Error() string {
	reason := e.Reason
	if reason == "" {
		reason = DialReason(e.Err)
	}
	return "cannot reach " + e.Backend + " at " + strings.Join(e.Endpoints, ", ") + ": " + reason
}

// Is reports whether target is ErrUnreachable.
func (e *UnreachableError) Is(target error) bool { return target == ErrUnreachable }

// Unwrap returns the cause.
func (e *UnreachableError) Unwrap() error { return e.Err }

// DialFailed returns the dial error within err if err says that no
// connection could be made, so nothing was sent: a refused connection, a
// unix socket that does not exist, or a name that does not resolve. A dial
// that timed out is not one: the server may be slow rather than absent,
// and bounding that is the caller's context's job.
func DialFailed(err error) (dial error, ok bool) {
	if err == nil {
		return nil, false
	}
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
