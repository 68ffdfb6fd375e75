package main

import (
	"context"
	"errors"
	"testing"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestNoAnswerNamesTheServerErrNames: once the context has ended, a
// failure is "cannot reach" the server its *driver.UnreachableError or
// *adapter.NoAnswerError names, at the bound that gave up; one that names
// no server says so without an empty address; before the end, err stands.
func TestNoAnswerNamesTheServerErrNames(t *testing.T) {
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tc := range []struct {
		ctx  context.Context
		err  error
		want string
	}{
		{ended, &driver.OpError{Backend: "mysql", Op: adapter.OpGet, Key: "k", Err: &adapter.NoAnswerError{Name: "mysql", Endpoint: "db:3306", Err: context.Canceled}},
			"cannot reach mysql at db:3306: no answer within --timeout 1s"},
		{ended, &driver.UnreachableError{Backend: "mysql", Endpoints: []string{"http://a:2379", "http://b:2379"}, Reason: "no answer before the context ended", Err: context.Canceled},
			"cannot reach mysql at http://a:2379, http://b:2379: no answer within --timeout 1s"},
		{ended, &adapter.NoAnswerError{Name: "mysql", Err: context.Canceled},
			"mysql: no answer within --timeout 1s: no answer from mysql before the context ended: context canceled"},
		{t.Context(), &adapter.NoAnswerError{Name: "mysql", Endpoint: "db:3306", Err: context.Canceled},
			"no answer from mysql at db:3306 before the context ended: context canceled"},
	} {
		got := noAnswer(tc.ctx, "mysql", "--timeout 1s", tc.err)
		if got.Error() != tc.want || !errors.Is(got, context.Canceled) {
			t.Errorf("noAnswer(%v) = %q\nwant %q, matching the context's error", tc.err, got, tc.want)
		}
	}
}
