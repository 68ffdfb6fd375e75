package main

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// unreachable is the error of a backend's server that could not be reached
// or did not answer: "cannot reach BACKEND at ENDPOINT: connection refused",
// the adapters' own *driver.UnreachableError.
func unreachable(backend, endpoint, why string, err error) error {
	return &driver.UnreachableError{Backend: backend, Endpoints: []string{endpoint}, Reason: why, Err: err}
}

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
	case !ended(ctx):
		return err
	}
	if ue, ok := errors.AsType[*driver.UnreachableError](err); ok && endpoint == "" {
		endpoint = strings.Join(ue.Endpoints, ", ")
	}
	return unreachable(backend, endpoint, "no answer within "+bound, err)
}

// ended reports whether ctx has ended or its deadline has passed: a store
// whose socket deadline it took from ctx can report the timeout before
// ctx's own timer has fired.
func ended(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(d)
}
