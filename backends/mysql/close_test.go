package mysql_test

import (
	"errors"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/mysql"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestCallsAfterCloseFail: after Close every call fails with a
// *driver.OpError that matches ErrClosed, and the row written before it is
// still there for another Store over the same pool (Close leaves the pool
// to its caller). The control is the same calls before Close, which
// succeed against MariaDB.
func TestCallsAfterCloseFail(t *testing.T) {
	s := newRaw(t)
	key := uniquePrefix(t) + "k"
	calls := func() map[string]error {
		ver, err := s.CompareAndSwap(t.Context(), key, driver.NoVersion, []byte("v"), time.Minute)
		errs := map[string]error{"CompareAndSwap": err}
		_, _, errs["Get"] = s.Get(t.Context(), key)
		_, errs["Expiry"] = s.Expiry(t.Context(), key)
		_, _, errs["List"] = s.List(t.Context(), key, "", 10)
		_, _, errs["SampleClock"] = s.SampleClock(t.Context())
		_, errs["Purge"] = s.Purge(t.Context())
		errs["Ping"] = s.Ping(t.Context())
		errs["CompareAndDelete"] = s.CompareAndDelete(t.Context(), key, ver)
		return errs
	}
	for name, err := range calls() {
		if err != nil {
			t.Errorf("control: %s before Close: %v", name, err)
		}
	}
	if _, err := s.CompareAndSwap(t.Context(), key, driver.NoVersion, []byte("kept"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	for name, err := range calls() {
		if _, ok := errors.AsType[*driver.OpError](err); !ok || !errors.Is(err, mysql.ErrClosed) {
			t.Errorf("%s after Close = %v, want a *driver.OpError matching ErrClosed", name, err)
		}
	}
	if _, err := s.PurgeKey(t.Context(), key); !errors.Is(err, mysql.ErrClosed) {
		t.Errorf("PurgeKey after Close = %v, want ErrClosed", err)
	}
	other, err := mysql.New(s.DB(), table)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if v, _, err := other.Get(t.Context(), key); err != nil || string(v) != "kept" {
		t.Errorf("another Store over the pool: Get = %q, %v; want the value written before Close", v, err)
	}
	if _, err := other.PurgeKey(t.Context(), key); err != nil {
		t.Error(err)
	}
}
