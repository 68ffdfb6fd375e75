package adapter

import (
	"errors"
	"testing"

	"github.com/kvbreaker/kvbreaker/driver"
)

// TestResend: a statement is sent until it succeeds, fails in a way not
// to resend, or has been sent attempts times, and at least once; the last
// error is returned.
func TestResend(t *testing.T) {
	lost, answer := errors.New("connection lost"), errors.New("an answer")
	for _, c := range []struct {
		attempts int
		results  []error // send's results in turn
		sends    int
		want     error
	}{
		{3, []error{nil}, 1, nil},
		{3, []error{lost, nil}, 2, nil},
		{3, []error{lost, lost, lost, nil}, 3, lost},
		{3, []error{answer, nil}, 1, answer},
		{3, []error{lost, answer, nil}, 2, answer},
		{1, []error{lost, nil}, 1, lost},
		{0, []error{lost, nil}, 1, lost},
	} {
		sends := 0
		err := Resend(c.attempts, func() error {
			sends++
			return c.results[sends-1]
		}, func(err error) bool { return errors.Is(err, lost) })
		if sends != c.sends || err != c.want {
			t.Errorf("Resend(%d) over %v: %d sends, %v; want %d, %v", c.attempts, c.results, sends, err, c.sends, c.want)
		}
	}
}

// TestNoVersionDelete: an absent key is not found, a present one a
// conflict with what is there, and a failed read the delete's error.
func TestNoVersionDelete(t *testing.T) {
	if err := NoVersionDelete(nil, driver.NoVersion, driver.ErrNotFound); err != driver.ErrNotFound {
		t.Errorf("absent: %v, want driver.ErrNotFound", err)
	}
	err := NoVersionDelete([]byte("v"), 7, nil)
	if ce, ok := errors.AsType[*driver.ConflictError](err); !ok || string(ce.Value) != "v" || ce.Version != 7 {
		t.Errorf("present: %v, want a conflict with v at 7", err)
	}
	cause := errors.New("refused")
	err = NoVersionDelete(nil, driver.NoVersion, &driver.OpError{Backend: "x", Op: "get", Key: "k", Err: cause})
	if oe, ok := errors.AsType[*driver.OpError](err); !ok || oe.Op != "compare-and-delete" || !errors.Is(err, cause) {
		t.Errorf("failed read: %v, want the OpError as compare-and-delete, wrapping its cause", err)
	}
}
