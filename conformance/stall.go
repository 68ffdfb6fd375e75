package conformance

import (
	"sync"
	"time"
)

// stallWatch records the spans in which this process ran none of its
// goroutines: a 10 ms ticker's tick taken more than stallMin late. On a
// loaded machine the process can wait for a core for hundreds of
// milliseconds; a real-time bound that such spans stretched a measurement
// past was decided by the load, not by the store.
type stallWatch struct {
	mu    sync.Mutex
	spans [][2]time.Time
	stop  chan struct{}
	done  chan struct{}
}

const (
	stallTick = 10 * time.Millisecond
	stallMin  = 50 * time.Millisecond
)

func watchStalls() *stallWatch {
	w := &stallWatch{stop: make(chan struct{}), done: make(chan struct{})}
	last := time.Now()
	go func() {
		defer close(w.done)
		t := time.NewTicker(stallTick)
		defer t.Stop()
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
		}
	}()
	return w
}

func (w *stallWatch) close() {
	close(w.stop)
	<-w.done
}

// within returns how much of [from, to] the stalls cover.
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
	return sum
}
