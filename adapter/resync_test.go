package adapter_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestBackoffDoublesToMaxAndResets: each wait is twice the one before it,
// never past Max, and Min again after Reset; a context that ends cuts a
// wait short with its error. The times are synctest's, so they are exact.
func TestBackoffDoublesToMaxAndResets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := adapter.Backoff{Min: 10 * time.Millisecond, Max: 50 * time.Millisecond}
		waited := func() time.Duration {
			start := time.Now()
			if err := b.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			return time.Since(start)
		}
		var got []time.Duration
		for range 5 {
			got = append(got, waited())
		}
		b.Reset()
		got = append(got, waited())
		want := []time.Duration{10, 20, 40, 50, 50, 10}
		for i := range want {
			want[i] *= time.Millisecond
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("waits %v, want %v", got, want)
		}

		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Millisecond)
		defer cancel()
		start := time.Now()
		if err := b.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Wait with a context ending first = %v, want its error", err)
		}
		if d := time.Since(start); d != 5*time.Millisecond {
			t.Errorf("Wait with a context ending after 5ms took %v", d)
		}
	})
}

// session is one scripted session of a Resync.
type session struct {
	began, synced bool
	err           error
}

// resyncRun runs a Resync over the scripted sessions (after the last, the
// store reads as closed) and returns the Lost changes' errors and Run's
// error.
func resyncRun(t *testing.T, refusal error, script []session) ([]error, error) {
	t.Helper()
	var lost []error
	i := 0
	r := adapter.Resync{
		Backoff: adapter.Backoff{Min: time.Millisecond, Max: time.Second},
		Session: func(context.Context) (bool, bool, error) {
			s := script[i]
			i++
			return s.began, s.synced, s.err
		},
		Gate:    adapter.Gate{Closed: func() bool { return i == len(script) }, ErrClosed: errClosed, Wrap: bare},
		Refused: func(err error) bool { return errors.Is(err, refusal) },
		Wrap:    func(_, _ string, err error) error { return fmt.Errorf("wrapped: %w", err) },
	}
	fn := func(c driver.Change) {
		if c.Kind != driver.ChangeLost {
			t.Errorf("Resync sent %v, want only Lost", c.Kind)
		}
		lost = append(lost, c.Err)
	}
	var err error
	synctest.Test(t, func(t *testing.T) { err = r.Follow(t.Context(), "p/", time.Second, false, nil, fn) })
	return lost, err
}

// bare is a Wrap that returns the error as it is.
func bare(_, _ string, err error) error { return err }

var (
	errClosed  = errors.New("closed")
	errRefused = errors.New("refused")
	errBroken  = errors.New("broken")
)

// TestResyncRefusedFirstReturns: a refusal before any session began is
// Follow's error, wrapped, with no Lost; the same refusal after a session
// that synced is a Lost and a resynchronisation (the control: Refused is
// consulted, and only before the feed ever started).
func TestResyncRefusedFirstReturns(t *testing.T) {
	lost, err := resyncRun(t, errRefused, []session{{err: errRefused}, {}})
	if !errors.Is(err, errRefused) || err.Error() != "wrapped: refused" || len(lost) != 0 {
		t.Errorf("refused first: Run = %v, Lost %v; want the wrapped refusal and no Lost", err, lost)
	}
	lost, err = resyncRun(t, errRefused, []session{{began: true, synced: true, err: errBroken}, {err: errRefused}, {began: true, err: errRefused}, {}})
	if err != errClosed {
		t.Errorf("refused after a synced session: Run = %v, want the closed error after the script", err)
	}
	if len(lost) != 2 || !errors.Is(lost[0], errBroken) || !errors.Is(lost[1], errRefused) {
		t.Errorf("Lost errors %v, want one for each session that began (broken, refused)", lost)
	}
}

// TestResyncEndsOnCancel: a context that ends during the back-off ends
// Run with its error, after the Lost of the session that began.
func TestResyncEndsOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		lost := 0
		r := adapter.Resync{
			Backoff: adapter.Backoff{Min: time.Hour, Max: time.Hour},
			Session: func(context.Context) (bool, bool, error) { return true, true, errBroken },
			Gate:    adapter.Gate{Closed: func() bool { return false }, Wrap: bare},
			Refused: func(error) bool { return false },
			Wrap:    bare,
		}
		if err := r.Follow(ctx, "p/", time.Second, false, nil, func(driver.Change) { lost++; cancel() }); !errors.Is(err, context.Canceled) || lost != 1 {
			t.Errorf("Run = %v after %d Lost, want context.Canceled after 1", err, lost)
		}
	})
}
