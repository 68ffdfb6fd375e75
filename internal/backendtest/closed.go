package backendtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// ClosedCalls checks a Store's Close: calls, which makes each of the
// store's calls once and returns their errors by name, succeeds before
// close (the control that the calls can succeed at all), and after close
// every call fails with a *driver.OpError that matches errClosed.
func ClosedCalls(t testing.TB, calls func() map[string]error, close func() error, errClosed error) {
	t.Helper()
	for name, err := range calls() {
		if err != nil {
			t.Errorf("control: %s before Close: %v", name, err)
		}
	}
	if err := close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	for name, err := range calls() {
		if _, ok := errors.AsType[*driver.OpError](err); !ok || !errors.Is(err, errClosed) {
			t.Errorf("%s after Close = %v, want a *driver.OpError matching %v", name, err, errClosed)
		}
	}
}

// StoreCalls returns a calls function for ClosedCalls over s: each round
// creates a key of its own under key, reads it (Get, and Expiry, List and
// SampleClock where s has them), deletes it and returns the errors by
// call. more, if not nil, adds a backend's own calls.
func StoreCalls(ctx context.Context, s driver.Store, key string, more func(errs map[string]error)) func() map[string]error {
	round := 0
	return func() map[string]error {
		round++
		k := fmt.Sprintf("%s-%d", key, round)
		ver, err := s.CompareAndSwap(ctx, k, driver.NoVersion, []byte("v"), time.Minute)
		errs := map[string]error{"CompareAndSwap": err}
		_, _, errs["Get"] = s.Get(ctx, k)
		if e, ok := s.(driver.ExpiryReader); ok {
			_, errs["Expiry"] = e.Expiry(ctx, k)
		}
		if l, ok := s.(driver.Lister); ok {
			_, _, errs["List"] = l.List(ctx, k, "", 10)
		}
		if c, ok := s.(driver.ClockSampler); ok {
			_, _, errs["SampleClock"] = c.SampleClock(ctx)
		}
		errs["CompareAndDelete"] = s.CompareAndDelete(ctx, k, ver)
		if more != nil {
			more(errs)
		}
		return errs
	}
}

// KeyPurger is a row store's Store with PurgeKey and Close (MySQL,
// PostgreSQL, SQLite).
type KeyPurger interface {
	driver.Store
	PurgeKey(ctx context.Context, key string) (int64, error)
	Close() error
}

// ClosedKeepsRows is ClosedCalls over StoreCalls for a row store whose
// Close leaves its data to the next Store: a row written before Close, a
// PurgeKey after it that fails with errClosed, and the row still read by
// reopen's Store (over the same pool or file), which then purges it.
// more adds the backend's own calls to StoreCalls'.
func ClosedKeepsRows(t *testing.T, s KeyPurger, key string, more func(errs map[string]error), errClosed error, reopen func() KeyPurger) {
	t.Helper()
	ctx := t.Context()
	kept := key + "-kept"
	if _, err := s.CompareAndSwap(ctx, kept, driver.NoVersion, []byte("kept"), time.Minute); err != nil {
		t.Fatal(err)
	}
	ClosedCalls(t, StoreCalls(ctx, s, key, more), s.Close, errClosed)
	if _, err := s.PurgeKey(ctx, kept); !errors.Is(err, errClosed) {
		t.Errorf("PurgeKey after Close = %v, want %v", err, errClosed)
	}
	other := reopen()
	if v, _, err := other.Get(ctx, kept); err != nil || string(v) != "kept" {
		t.Errorf("the next Store: Get = %q, %v; want the value written before Close", v, err)
	}
	if _, err := other.PurgeKey(ctx, kept); err != nil {
		t.Error(err)
	}
}
