package leakcheck

import (
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { VerifyTestMain(m) }

// TestFindsLeak: a goroutine still blocked is reported with its stack (the
// negative control), and none is once it ends.
func TestFindsLeak(t *testing.T) {
	started, stop, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		blockedForLeakcheck(started, stop)
	}()
	// Its stack names blockedForLeakcheck only once it is in it: on a
	// loaded machine it may not have run by the time Find gives up.
	<-started
	err := Find(50 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "blockedForLeakcheck") {
		t.Fatalf("Find with a blocked goroutine = %v, want it reported by its function", err)
	}
	close(stop)
	<-done
	if err := Find(2 * time.Second); err != nil {
		t.Fatalf("Find after the goroutine ended: %v", err)
	}
}

func blockedForLeakcheck(started, stop chan struct{}) {
	close(started)
	<-stop
}
