//go:build unix

package httpbreaker_test

import (
	"os/signal"
	"syscall"
	"testing"
)

// TestSignalCancelledRecordsNothing: a request cancelled by a signal
// (signal.NotifyContext, whose context.Cause names the signal) is the
// process shutting down, not the host failing. The signal is real: SIGUSR1
// to this test process, which NotifyContext catches.
func TestSignalCancelledRecordsNothing(t *testing.T) {
	f := newFixture(t)
	srv, started := slowServer(t)
	for range threshold + 1 {
		ctx, stop := signal.NotifyContext(t.Context(), syscall.SIGUSR1)
		returned := onStart(started, func() {
			if err := syscall.Kill(syscall.Getpid(), syscall.SIGUSR1); err != nil {
				t.Error(err)
				stop()
			}
		})
		_, err := f.get(t, ctx, srv.URL)
		returned()
		stop()
		if err == nil {
			t.Fatal("a request cancelled by a signal succeeded")
		}
	}
	if st := f.state(t, srv.URL); st.Found {
		t.Fatalf("requests cancelled by a signal were charged: %+v", st)
	}
}
