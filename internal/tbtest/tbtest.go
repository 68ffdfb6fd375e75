// Package tbtest lets a test helper's own tests see what the helper
// reports: FirstFailure runs it on a testing.TB that keeps the first
// failure instead of failing the test. A negative control then asserts on
// the message.
package tbtest

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// recorder is a testing.TB that keeps the first failure; Fatalf and
// FailNow end the goroutine, as testing's do.
type recorder struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.msg == "" {
		r.msg = fmt.Sprintf(format, args...)
	}
}

func (r *recorder) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }
func (r *recorder) FailNow()          { r.Fatalf("FailNow") }

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msg != ""
}

// FirstFailure runs f on its own goroutine with a testing.TB over t that
// records instead of failing, and returns the first failure f reported
// ("" if none). Logs, cleanups and the rest pass through to t.
func FirstFailure(t testing.TB, f func(testing.TB)) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.msg
}
