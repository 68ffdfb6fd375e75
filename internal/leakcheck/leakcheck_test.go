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
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		blockedForLeakcheck(stop)
	}()
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

func blockedForLeakcheck(stop chan struct{}) { <-stop }
