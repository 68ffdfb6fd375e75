package main

import (
	"context"
	"errors"
	"strings"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// noAnswer translates the failure of a connection's first request. A
// store's dial that reached no server and knows why (refused, no such
// host) is "cannot reach …" as every backend says it, without the store's
// "etcd: dial:", even when ctx has ended since: the store's check of why
// outlives a short --timeout. Otherwise, when ctx ended (the server
// accepted the connection but never answered) it says which bound gave
// up, and err stands when it did not. An endpoint of "" is the one err's
// *driver.UnreachableError names.
func noAnswer(ctx context.Context, backend, endpoint, bound string, err error) error {
	oe, isOp := err.(*driver.OpError)
	waited := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
	switch {
	case isOp && oe.Op == "dial" && errors.Is(err, driver.ErrUnreachable) && !waited:
		return oe.Err
	case adapter.Ended(ctx) == nil:
		return err
	}
	if ue, ok := errors.AsType[*driver.UnreachableError](err); ok && endpoint == "" {
		endpoint = strings.Join(ue.Endpoints, ", ")
	}
	return &driver.UnreachableError{Backend: backend, Endpoints: []string{endpoint}, Reason: "no answer within " + bound, Err: err}
}
