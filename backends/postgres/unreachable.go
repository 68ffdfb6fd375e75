package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrUnreachable is matched (errors.Is) by the error of a call that could
// not reach the server at all: the connection was refused or the host's name
// did not resolve. Nothing was sent. An *UnreachableError says where.
var ErrUnreachable = errors.New("postgres: server unreachable")

// UnreachableError is a call that reached no server: "cannot reach postgres
// at <host:port>: connection refused".
type UnreachableError struct {
	Endpoint string // host:port, or a unix socket's path
	Err      error  // the dial error
}

func (e *UnreachableError) Error() string {
	return "cannot reach postgres at " + e.Endpoint + ": " + reason(e.Err)
}

// Unwrap returns the dial error.
func (e *UnreachableError) Unwrap() error { return e.Err }

// Is matches ErrUnreachable.
func (e *UnreachableError) Is(target error) bool { return target == ErrUnreachable }

func reason(err error) string {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return syscall.ECONNREFUSED.Error()
	}
	if errors.Is(err, syscall.ENOENT) {
		return "no such socket"
	}
	if dns, ok := errors.AsType[*net.DNSError](err); ok && dns.IsNotFound {
		return "no such host " + dns.Name
	}
	return err.Error()
}

// cause turns pgx's error into the cause an OpError carries: an
// *UnreachableError when no connection could be made, "no answer from
// postgres at <endpoint> before the context ended" when the context ended
// while a statement was out, and otherwise err itself.
func (s *Store) cause(err error) error {
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		if dns, ok := errors.AsType[*net.DNSError](err); ok && dns.IsNotFound {
			return &UnreachableError{Endpoint: s.endpoint, Err: err}
		}
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
			return &UnreachableError{Endpoint: s.endpoint, Err: err}
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("no answer from postgres at %s before the context ended: %w", s.endpoint, err)
	}
	return err
}
