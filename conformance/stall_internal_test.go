package conformance

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
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

// TestStallWatchCountsCPUWait: threads of this process that must share the
// cores with busy processes accrue run delay, which within reports for the
// span they waited in, up to the span's length.
func TestStallWatchCountsCPUWait(t *testing.T) {
	if _, ok := runDelay(); !ok {
		if runtime.GOOS == "linux" {
			t.Fatal("runDelay reads nothing from /proc/self/task/*/schedstat on Linux")
		}
		t.Skipf("no per-thread run delay on %s: the watch counts stalls alone there", runtime.GOOS)
	}
	w := watchStalls()
	defer w.close()
	// Busy children, twice as many as cores, and as many busy goroutines
	// of ours as Ps: ours can get at most a third of the cores.
	n := runtime.NumCPU()
	var kids []*exec.Cmd
	for range 2 * n {
		c := exec.Command("sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		kids = append(kids, c)
	}
	defer func() {
		for _, c := range kids {
			c.Process.Kill()
			c.Wait()
		}
	}()
	from := time.Now()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for !stop.Load() {
			}
		})
	}
	time.Sleep(500 * time.Millisecond) // the span measured, in real time
	stop.Store(true)
	wg.Wait()
	to := time.Now()
	time.Sleep(2 * waitTick) // a sample after the span
	got := w.within(from, to)
	if got < 100*time.Millisecond {
		t.Errorf("within a %v span of %d busy goroutines beside %d busy processes: %v of load, want at least 100 ms", to.Sub(from).Round(time.Millisecond), runtime.GOMAXPROCS(0), 2*n, got)
	}
	if got > to.Sub(from) {
		t.Errorf("within = %v, more than the span %v", got, to.Sub(from))
	}
}

// TestWaitWithinEnclosingSamples: the run delay of a span is taken between
// the samples that enclose it, never negative, never more than the span.
func TestWaitWithinEnclosingSamples(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	w := &stallWatch{waits: []waitSample{
		{at(0), 0}, {at(50), 10 * time.Millisecond}, {at(100), 70 * time.Millisecond},
		{at(150), 60 * time.Millisecond}, // a thread exited
		{at(200), 400 * time.Millisecond},
	}}
	for _, c := range []struct {
		from, to int
		want     time.Duration
	}{
		{50, 100, 50 * time.Millisecond},
		{60, 90, 30 * time.Millisecond}, // 60 ms between the enclosing samples, capped at the span
		{100, 150, 0},                   // the sum fell: not negative
		{0, 200, 200 * time.Millisecond},
		{-100, -50, 0}, // before every sample
		{100, 100, 0},
	} {
		if got := w.waitWithin(at(c.from), at(c.to)); got != c.want {
			t.Errorf("waitWithin(%d ms, %d ms) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}
