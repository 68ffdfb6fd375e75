// Package leakcheck fails a test binary that leaves goroutines running, as
// go.uber.org/goleak does, with the standard library only: the root module's
// tests use it so that the module graph a user of kvbreaker inherits holds no
// test-only dependency (goleak requires testify).
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// ignored are goroutines of the runtime and the test framework, by a
// function on their stack.
var ignored = []string{
	"testing.RunTests",
	"testing.(*T).Run",
	"testing.(*M).Run",
	"testing.(*M).startAlarm",
	"testing.tRunner.func1",
	"testing.runFuzzing",
	"testing.runFuzzTests",
	"os/signal.signal_recv",
	"os/signal.loop",
	"runtime.ensureSigM",
	"runtime.ReadTrace",
	"runtime/trace.Start",
}

// VerifyTestMain runs the tests and then, if they passed, fails the binary
// when goroutines are still running after a grace period.
func VerifyTestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := Find(2 * time.Second); err != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Find reports the goroutines other than the caller's and the runtime's or
// test framework's, waiting up to grace for them to end.
func Find(grace time.Duration) error {
	deadline := time.Now().Add(grace)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		leaks := leaked()
		if len(leaks) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d goroutines still running:\n\n%s", len(leaks), strings.Join(leaks, "\n\n"))
		}
		time.Sleep(wait) // waiting for goroutines to end, not for logic
	}
}

// leaked returns the stacks of goroutines that are neither the caller's nor
// ignored.
func leaked() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	stacks := strings.Split(string(buf), "\n\n")
	var out []string
	for _, g := range stacks[1:] { // the first is the caller's own
		if !isIgnored(g) {
			out = append(out, g)
		}
	}
	return out
}

func isIgnored(stack string) bool {
	for _, f := range ignored {
		if strings.Contains(stack, f+"(") || strings.Contains(stack, f+"\n") {
			return true
		}
	}
	return false
}
