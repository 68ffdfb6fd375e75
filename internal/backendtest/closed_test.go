package backendtest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

// TestClosedCallsFailsOnAStoreThatStaysOpen: the memory store's Close ends
// its Follows only and its calls go on succeeding, which ClosedCalls
// reports, naming the call (the stores that refuse calls after Close,
// DynamoDB and MySQL, pass it in their own tests).
func TestClosedCallsFailsOnAStoreThatStaysOpen(t *testing.T) {
	s := memory.New()
	round := 0
	calls := func() map[string]error {
		round++
		key := strings.Repeat("k", round)
		_, err := s.CompareAndSwap(t.Context(), key, driver.NoVersion, []byte("v"), time.Minute)
		return map[string]error{"CompareAndSwap": err}
	}
	got := failure(t, func(tb testing.TB) { backendtest.ClosedCalls(tb, calls, s.Close, memory.ErrClosed) })
	if !strings.Contains(got, "CompareAndSwap after Close = <nil>") {
		t.Errorf("ClosedCalls over a store that stays open reported %q", got)
	}
}
