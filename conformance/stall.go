package conformance

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// stallWatch records how much the machine's load held this process back:
//   - the spans in which it ran none of its goroutines: a 10 ms ticker's
//     tick taken more than stallMin late;
//   - on Linux, the time its threads spent runnable but waiting for a core
//     (the run delay of /proc/self/task/*/schedstat), sampled every
//     waitTick. A goroutine that needs a core's time, such as a pure-Go
//     SQLite query under the race detector, is slowed by that wait while
//     the ticker's goroutine still runs on time.
//
// On a loaded machine the process can wait for a core for hundreds of
// milliseconds; a real-time bound that such waits stretched a measurement
// past was decided by the load, not by the store.
type stallWatch struct {
	mu    sync.Mutex
	spans [][2]time.Time
	waits []waitSample // cumulative run delay, in time order
	stop  chan struct{}
	done  chan struct{}
}

type waitSample struct {
	at   time.Time
	wait time.Duration
}

const (
	stallTick = 10 * time.Millisecond
	stallMin  = 50 * time.Millisecond
	waitTick  = 50 * time.Millisecond
)

func watchStalls() *stallWatch {
	w := &stallWatch{stop: make(chan struct{}), done: make(chan struct{})}
	last := time.Now()
	w.sampleWait(last)
	go func() {
		defer close(w.done)
		t := time.NewTicker(stallTick)
		defer t.Stop()
		lastWait := last
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
			now := time.Now()
			if now.Sub(last) > stallTick+stallMin {
				w.mu.Lock()
				w.spans = append(w.spans, [2]time.Time{last.Add(stallTick), now})
				w.mu.Unlock()
			}
			last = now
			if now.Sub(lastWait) >= waitTick {
				w.sampleWait(now)
				lastWait = now
			}
		}
	}()
	return w
}

// sampleWait records the process's cumulative run delay, if the system
// reports it.
func (w *stallWatch) sampleWait(now time.Time) {
	d, ok := runDelay()
	if !ok {
		return
	}
	w.mu.Lock()
	w.waits = append(w.waits, waitSample{now, d})
	w.mu.Unlock()
}

// runDelay sums the time every thread of this process has spent runnable,
// waiting for a core (the second field of Linux's schedstat, in ns).
func runDelay() (time.Duration, bool) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, false
	}
	var sum time.Duration
	n := 0
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread exited
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		ns, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		sum += time.Duration(ns)
		n++
	}
	return sum, n > 0
}

func (w *stallWatch) close() {
	close(w.stop)
	<-w.done
}

// within returns how much of [from, to] the load took from this process:
// the stalls' cover, or the run delay its threads accrued over the samples
// that enclose the span (at most the span), whichever is more. A run delay
// summed over threads can count two waiting at once twice; it says the
// process wanted more cores than it got, which is what made it late.
func (w *stallWatch) within(from, to time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var sum time.Duration
	for _, s := range w.spans {
		a, b := s[0], s[1]
		if a.Before(from) {
			a = from
		}
		if b.After(to) {
			b = to
		}
		if b.After(a) {
			sum += b.Sub(a)
		}
	}
	return max(sum, w.waitWithin(from, to))
}

func (w *stallWatch) waitWithin(from, to time.Time) time.Duration {
	if !to.After(from) || len(w.waits) < 2 {
		return 0
	}
	// The last sample at or before from (else the first) and the first at
	// or after to (else the last).
	i := 0
	for j, s := range w.waits {
		if s.at.After(from) {
			break
		}
		i = j
	}
	k := len(w.waits) - 1
	for j := len(w.waits) - 1; j >= 0; j-- {
		if w.waits[j].at.Before(to) {
			break
		}
		k = j
	}
	if k <= i {
		return 0
	}
	d := w.waits[k].wait - w.waits[i].wait
	return min(max(d, 0), to.Sub(from))
}
