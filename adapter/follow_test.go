package adapter_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker/adapter"
)

// TestListArgsRefusesNonPositive: every limit below 1 is refused with an
// error that names it and says what to pass; every positive one passes
// (the control: a check that refused everything would fail here).
func TestListArgsRefusesNonPositive(t *testing.T) {
	for _, limit := range []int{0, -1, -1 << 62} {
		err := adapter.ListArgs(limit)
		if err == nil {
			t.Errorf("ListArgs(%d) = nil, want an error", limit)
			continue
		}
		if !strings.Contains(err.Error(), "limit "+strconv.Itoa(limit)+" ") || !strings.Contains(err.Error(), "pass ") {
			t.Errorf("ListArgs(%d) = %q: want the limit named and what to pass", limit, err)
		}
	}
	for _, limit := range []int{1, 2, 1 << 62} {
		if err := adapter.ListArgs(limit); err != nil {
			t.Errorf("ListArgs(%d) = %v, want nil", limit, err)
		}
	}
}
