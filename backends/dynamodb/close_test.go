package dynamodb_test

import (
	"errors"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

// TestCallsAfterCloseFail: after Close every call fails with a
// *driver.OpError that matches ErrClosed, and the key written before it is
// still there for another Store over the same client (Close leaves the
// client to its caller). The control is the same calls before Close,
// which succeed against dynalite.
func TestCallsAfterCloseFail(t *testing.T) {
	s, err := dynamodb.New(client, table)
	if err != nil {
		t.Fatal(err)
	}
	key := uniquePrefix(t) + "k"
	calls := backendtest.StoreCalls(t.Context(), s, key, nil)
	if _, err := s.CompareAndSwap(t.Context(), key+"-kept", driver.NoVersion, []byte("kept"), time.Minute); err != nil {
		t.Fatal(err)
	}
	backendtest.ClosedCalls(t, calls, s.Close, dynamodb.ErrClosed)
	if _, err := s.PurgeKey(t.Context(), key+"-kept"); !errors.Is(err, dynamodb.ErrClosed) {
		t.Errorf("PurgeKey after Close = %v, want ErrClosed", err)
	}
	other, err := dynamodb.New(client, table)
	if err != nil {
		t.Fatal(err)
	}
	if v, _, err := other.Get(t.Context(), key+"-kept"); err != nil || string(v) != "kept" {
		t.Errorf("another Store over the client: Get = %q, %v; want the value written before Close", v, err)
	}
	if _, err := other.PurgeKey(t.Context(), key+"-kept"); err != nil {
		t.Error(err)
	}
}
