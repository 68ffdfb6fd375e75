package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// noAnswer translates the failure of a connection's first request. A
// store's dial that reached no server and knows why (refused, no such
// host) is "cannot reach …" as every backend says it, without the store's
// "etcd: dial:", even when ctx has ended since: the store's check of why
// outlives a short --timeout. Otherwise, when ctx ended (the server
// accepted the connection but never answered) it says which bound gave
// up, naming the server err's *driver.UnreachableError or
// *adapter.NoAnswerError names, and err stands when it did not.
func noAnswer(ctx context.Context, backend, bound string, err error) error {
	oe, isOp := err.(*driver.OpError)
	waited := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
	switch {
	case isOp && oe.Op == "dial" && errors.Is(err, driver.ErrUnreachable) && !waited:
		return oe.Err
	case adapter.Ended(ctx) == nil:
		return err
	}
	var at []string
	if ue, ok := errors.AsType[*driver.UnreachableError](err); ok {
		at = ue.Endpoints
	} else if na, ok := errors.AsType[*adapter.NoAnswerError](err); ok && na.Endpoint != "" {
		at = []string{na.Endpoint}
	} else {
		return fmt.Errorf("%s: no answer within %s: %w", backend, bound, err)
	}
	return &driver.UnreachableError{Backend: backend, Endpoints: at, Reason: "no answer within " + bound, Err: err}
}
