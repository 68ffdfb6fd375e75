package backendtest

import (
	"fmt"
	"testing"
)

// SessionHeld runs run as subtests "run 1", "run 2", … until one in which
// no feed lost its session, at most attempts of them. A feed rightly
// reports Lost when a heartbeat comes back later than its bound, which a
// loaded machine can cause, and starts a new session: a count of requests
// that assumes one session per feed is then undecided, not wrong. run
// returns the Lost's error before it checks anything (nil: none was lost,
// and it checked); that run is then skipped as undecided, and its feeds,
// stopped by its own cleanups, count nothing in the next. When every run
// lost a session, t is skipped as undecided too.
func SessionHeld(t *testing.T, attempts int, run func(t *testing.T) (lost error)) {
	t.Helper()
	var lost error
	for i := range attempts {
		lost = nil
		ok := t.Run(fmt.Sprintf("run %d", i+1), func(t *testing.T) {
			if lost = run(t); lost != nil {
				t.Skipf("undecided: a feed lost its session (%v), so its count assumes too little", lost)
			}
		})
		if !ok || lost == nil {
			return
		}
	}
	t.Skipf("undecided: in each of %d runs a feed lost its session; the last: %v", attempts, lost)
}
