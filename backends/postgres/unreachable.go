package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kvbreaker/kvbreaker/driver"
)

// ErrUnreachable is matched (errors.Is) by the error of a call that could
// not reach the server at all: the connection was refused or the host's name
// did not resolve. Nothing was sent. An *UnreachableError says where. It is
// an alias of driver.ErrUnreachable, so matching either matches every
// backend's.
var ErrUnreachable = driver.ErrUnreachable

// UnreachableError is a call that reached no server: "cannot reach postgres
// at <host:port>: connection refused", with Endpoints holding the host:port
// (or a unix socket's path) and Err pgx's *pgconn.ConnectError. It is an
// alias of driver.UnreachableError.
type UnreachableError = driver.UnreachableError

// cause turns pgx's error into the cause an OpError carries: an
// *UnreachableError when no connection could be made, "no answer from
// postgres at <endpoint> before the context ended" when the context ended
// while a statement was out, and otherwise err itself.
func (s *Store) cause(err error) error {
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		// Err stays pgx's error, so errors.As still finds the ConnectError.
		if _, ok := driver.DialFailed(err); ok {
			return &UnreachableError{Backend: "postgres", Endpoints: []string{s.endpoint}, Err: err}
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("no answer from postgres at %s before the context ended: %w", s.endpoint, err)
	}
	return err
}
