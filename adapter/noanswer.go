package adapter

import (
	"context"
	"errors"
	"fmt"
)

// NoAnswerError is the cause of a call whose context ended while its
// request was out to a server that had taken the connection: "no answer
// from postgres at 127.0.0.1:5432 before the context ended: context
// deadline exceeded". The server was reached, so it does not match
// driver.ErrUnreachable, and the request may have been carried out; it
// matches the context's error (Err). A tool that reports it as a bound it
// gave up at names the server by Endpoint.
type NoAnswerError struct {
	// Name is how the message names the server ("postgres", "Workers
	// KV"); Endpoint is where it was, or "" where the store does not know.
	Name, Endpoint string
	// Err is the context's error, or the client's error that carries it.
	Err error
}

func (e *NoAnswerError) Error() string {
	at := ""
	if e.Endpoint != "" {
		at = " at " + e.Endpoint
	}
	return fmt.Sprintf("no answer from %s%s before the context ended: %v", e.Name, at, e.Err)
}

// Unwrap returns Err.
func (e *NoAnswerError) Unwrap() error { return e.Err }

// NoAnswer is err as a *NoAnswerError naming the server when err matches
// a context's end (context.DeadlineExceeded or context.Canceled) and is
// not one already; otherwise err, nil included.
func NoAnswer(name, endpoint string, err error) error {
	if _, ok := errors.AsType[*NoAnswerError](err); ok || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return err
	}
	return &NoAnswerError{Name: name, Endpoint: endpoint, Err: err}
}
