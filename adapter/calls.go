package adapter

import (
	"errors"

	"github.com/kvbreaker/kvbreaker/driver"
)

// Resend sends a statement up to attempts times (at least once): again
// after a failure resendable says a new connection may not meet (a
// connection that broke before its answer arrived, a deadlock the server
// rolled back), never after an answer, the end of the caller's context or
// a refused connection, which the next attempt would meet again. It
// returns send's last error. Only a statement that is safe to send twice
// may be resent: a conditional write that names its own write
// (MySQL, PostgreSQL) is.
func Resend(attempts int, send func() error, resendable func(error) bool) error {
	err := send()
	for range attempts - 1 {
		if !resendable(err) {
			return err
		}
		err = send()
	}
	return err
}

// NoVersionDelete is driver.Store.CompareAndDelete's answer for
// old == driver.NoVersion, which asks to delete a key that is absent: there
// is nothing to delete, so it is what a Get read (value, version, err)
// says is there: Get's error (driver.ErrNotFound for an absent key, an
// *driver.OpError renamed to the delete's op), or a *driver.ConflictError
// with the value and version present.
func NoVersionDelete(value []byte, version driver.Version, err error) error {
	if err != nil {
		if oe, ok := errors.AsType[*driver.OpError](err); ok {
			oe.Op = "compare-and-delete"
		}
		return err
	}
	return &driver.ConflictError{Value: value, Version: version}
}
