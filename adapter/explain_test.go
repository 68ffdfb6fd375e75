package adapter_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestExplainedTextAloneUnwrapsToCause: the error's text is the
// explanation and nothing after it (the cause's text appears once, where
// the format put it), and errors.Is and errors.As reach the cause and the
// SDK-style error type behind it. The negative control is fmt.Errorf with
// %w, the wrapping Explained replaces, which prints the cause twice.
func TestExplainedTextAloneUnwrapsToCause(t *testing.T) {
	cause := &os.PathError{Op: "open", Path: "/x", Err: fs.ErrPermission}
	err := adapter.Explained(cause, "the store refused (%v): grant access to %s", cause, "/x")

	if want := "the store refused (" + cause.Error() + "): grant access to /x"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if n := strings.Count(err.Error(), cause.Error()); n != 1 {
		t.Errorf("the cause's text appears %d times in %q, want once", n, err.Error())
	}
	if !errors.Is(err, fs.ErrPermission) {
		t.Errorf("errors.Is(%v, fs.ErrPermission) = false", err)
	}
	if pe, ok := errors.AsType[*os.PathError](err); !ok || pe != cause {
		t.Errorf("errors.As found %v, %v; want the cause", pe, ok)
	}
	if errors.Unwrap(err) != cause {
		t.Errorf("Unwrap = %v, want the cause", errors.Unwrap(err))
	}

	wrapped := fmt.Errorf("the store refused (%v): grant access to %s: %w", cause, "/x", cause)
	if n := strings.Count(wrapped.Error(), cause.Error()); n == 1 {
		t.Errorf("negative control: %%w wrapping printed the cause once (%q); the count cannot tell Explained from it", wrapped.Error())
	}
}

// TestForeignTable: a read the server answered with a failure makes a
// foreign table, which reads as that failure and still finds it; a read
// the context ended or the server was unreachable for stands as it is.
func TestForeignTable(t *testing.T) {
	refused := errors.New(`column "v" does not exist`)
	err := adapter.ForeignTable(fmt.Errorf("get: %w", refused))
	if !errors.Is(err, adapter.ErrForeignTable) || !errors.Is(err, refused) || err.Error() != `get: column "v" does not exist` {
		t.Errorf("ForeignTable = %v: want it to read as the read's error and match ErrForeignTable and it", err)
	}
	for _, cause := range []error{
		adapter.NoAnswer("postgres", "db:5432", context.DeadlineExceeded),
		fmt.Errorf("get: %w", context.Canceled),
		&driver.UnreachableError{Backend: "mysql", Endpoints: []string{"db:3306"}, Reason: "connection refused"},
	} {
		if got := adapter.ForeignTable(cause); got != cause || errors.Is(got, adapter.ErrForeignTable) {
			t.Errorf("ForeignTable(%v) = %v, want it unchanged: the table was never read", cause, got)
		}
	}
}
