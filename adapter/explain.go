package adapter

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvbreaker/kvbreaker/driver"
)

// ErrNoTable is matched (errors.Is) by a store's error when the table it
// was given does not exist: every backend's own ErrNoTable is this one, so
// that a tool that offers to create the table asks once for all of them.
var ErrNoTable = errors.New("table does not exist")

// ErrForeignTable is matched (errors.Is) by a store's error when the table
// it was given exists but a Store cannot read it: another program's table
// of the same name, or one of another shape. Every backend's own
// ErrForeignTable is this one.
var ErrForeignTable = errors.New("a store cannot read the table")

// ForeignTable is the error of a Store's read of an existing table that
// failed: it matches ErrForeignTable and reads and unwraps as err. A read
// the server never answered (the context ended, or it was unreachable)
// says nothing of the table, and stands as err.
func ForeignTable(err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, driver.ErrUnreachable) {
		return err
	}
	return &foreignTable{err}
}

type foreignTable struct{ err error }

func (e *foreignTable) Error() string        { return e.err.Error() }
func (e *foreignTable) Unwrap() error        { return e.err }
func (e *foreignTable) Is(target error) bool { return target == ErrForeignTable }

// Explained returns an error whose text is the explanation formatted from
// format and a, and which unwraps to err. It is for the explanation of a
// server's refusal in words of the store's own (a wrong password, a missing
// database or privilege, and what to change), whose text already holds what
// the server said: fmt.Errorf with %w would print err a second time, after
// the explanation. errors.Is and errors.As still find err and the SDK's
// error types behind it.
func Explained(err error, format string, a ...any) error {
	return &explainedError{fmt.Sprintf(format, a...), err}
}

// explainedError is an explanation of err in words of its own: Error is
// the explanation alone, Unwrap is err.
type explainedError struct {
	msg string
	err error
}

func (e *explainedError) Error() string { return e.msg }
func (e *explainedError) Unwrap() error { return e.err }
