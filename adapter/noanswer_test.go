package adapter_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestNoAnswerError: the message names the server where the store knows
// it, the error matches the context's error it carries through a client's
// wrapping, and not driver.ErrUnreachable: the server was reached.
func TestNoAnswerError(t *testing.T) {
	cut := fmt.Errorf("read tcp: %w", context.DeadlineExceeded)
	for _, tc := range []struct {
		e    *adapter.NoAnswerError
		want string
	}{
		{&adapter.NoAnswerError{Name: "postgres", Endpoint: "127.0.0.1:5432", Err: cut},
			"no answer from postgres at 127.0.0.1:5432 before the context ended: read tcp: context deadline exceeded"},
		{&adapter.NoAnswerError{Name: "mysql", Err: context.Canceled},
			"no answer from mysql before the context ended: context canceled"},
	} {
		var err error = &driver.OpError{Backend: tc.e.Name, Op: adapter.OpGet, Key: "k", Err: tc.e}
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %q\nwant      %q", got, tc.want)
		}
		if !errors.Is(err, tc.e.Err) || errors.Is(err, driver.ErrUnreachable) {
			t.Errorf("%v: want it to match %v and not driver.ErrUnreachable", err, tc.e.Err)
		}
		if na, ok := errors.AsType[*adapter.NoAnswerError](err); !ok || na.Endpoint != tc.e.Endpoint {
			t.Errorf("%v: no *NoAnswerError naming %q", err, tc.e.Endpoint)
		}
	}
}

// TestNoAnswer: an error that matches a context's end becomes a
// *NoAnswerError once, however often it is passed through; any other error,
// and nil, stands.
func TestNoAnswer(t *testing.T) {
	cut := fmt.Errorf("read tcp: %w", context.DeadlineExceeded)
	once := adapter.NoAnswer("postgres", "db:5432", cut)
	if na, ok := once.(*adapter.NoAnswerError); !ok || na.Err != cut || na.Endpoint != "db:5432" || na.Name != "postgres" {
		t.Fatalf("NoAnswer(%v) = %#v, want a *NoAnswerError around it", cut, once)
	}
	wrapped := fmt.Errorf("prepare: %w", once)
	if again := adapter.NoAnswer("postgres", "db:5432", wrapped); again != wrapped {
		t.Errorf("NoAnswer of one already = %v, want it unchanged", again)
	}
	if got := adapter.NoAnswer("postgres", "", context.Canceled); !errors.Is(got, context.Canceled) || got.Error() != "no answer from postgres before the context ended: context canceled" {
		t.Errorf("NoAnswer(context.Canceled) = %v", got)
	}
	other := errors.New("syntax error")
	for _, err := range []error{other, nil} {
		if got := adapter.NoAnswer("postgres", "db:5432", err); got != err {
			t.Errorf("NoAnswer(%v) = %v, want it unchanged", err, got)
		}
	}
}
