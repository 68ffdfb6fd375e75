package conformance

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// TestStallWatchRecordsAStop: stopping the whole process (SIGSTOP from a
// child, SIGCONT 300 ms later) is recorded as a stall covering most of the
// stop; the span before it is not.
func TestStallWatchRecordsAStop(t *testing.T) {
	w := watchStalls()
	before := time.Now()
	pid := strconv.Itoa(os.Getpid())
	if out, err := exec.Command("sh", "-c", "kill -STOP "+pid+"; sleep 0.3; kill -CONT "+pid).CombinedOutput(); err != nil {
		t.Fatalf("stop and continue the process: %v\n%s", err, out)
	}
	after := time.Now()
	// The first tick after the continue records the stall: poll for it.
	for deadline := time.Now().Add(10 * time.Second); w.within(before, after) == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // polling the watcher's record
	}
	w.close()
	if s := w.within(before, after); s < 250*time.Millisecond {
		t.Errorf("stalls %v cover %v of the 300 ms stop, want at least 250 ms", w.spans, s)
	}
	if s := w.within(before.Add(-time.Hour), before.Add(-time.Minute)); s != 0 {
		t.Errorf("stalls cover %v of a span before the watch", s)
	}
}
