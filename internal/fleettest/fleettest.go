// Package fleettest is what the backends' Breaker-fleet tests share: a
// fleet of Breakers (one per worker, each over its own store instance) on a
// clock the test moves, the transitions they report, and calls made by all
// workers at once. Each backend's test keeps its own scenario; this package
// only spares them writing the same scaffolding again.
package fleettest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
)

// Clock is the fleet's clock: decisions run on it, while the records' TTLs
// run on the store's own clock and outlast the test.
type Clock struct{ ns atomic.Int64 }

// NewClock returns a clock at the current time, to the millisecond.
func NewClock() *Clock {
	c := &Clock{}
	c.ns.Store(time.Now().Truncate(time.Millisecond).UnixNano())
	return c
}

func (c *Clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *Clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// Set moves the clock to t. The zero Clock is at the Unix epoch: set it
// to start a fleet at a chosen instant.
func (c *Clock) Set(t time.Time) { c.ns.Store(t.UnixNano()) }

// Transitions counts OnStateChange calls across a fleet, by "from→to".
type Transitions struct {
	mu sync.Mutex
	n  map[string]int
}

// Record is an OnStateChange.
func (tr *Transitions) Record(_ string, from, to kvbreaker.State) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.n == nil {
		tr.n = map[string]int{}
	}
	tr.n[fmt.Sprintf("%s→%s", from, to)]++
}

// Take returns the counts so far and resets them.
func (tr *Transitions) Take() map[string]int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := tr.n
	tr.n = map[string]int{}
	if n == nil {
		n = map[string]int{}
	}
	return n
}

// Want fails t unless the transitions since the last Take are want.
func (tr *Transitions) Want(t testing.TB, want map[string]int) {
	t.Helper()
	if got := tr.Take(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("transitions %v, want %v", got, want)
	}
}

// Fleet is one Breaker per store, all on Clock and reporting to Tr.
type Fleet struct {
	Breakers []*kvbreaker.Breaker
	Clock    *Clock
	Tr       *Transitions
}

// New builds a Breaker with s over each store (s.Clock and s.OnStateChange
// are the fleet's, and the background clock checks are off: the fleet's
// clock is a fake one, so comparing it with the store's says nothing, and
// a sample per worker at the first call would only load the server).
func New(t testing.TB, stores []driver.Store, s kvbreaker.Settings) *Fleet {
	t.Helper()
	return NewOn(t, NewClock(), stores, s)
}

// NewOn is New on clk, for stores that must read the fleet's clock too
// (a store whose server judges no time, such as dynalite, expires records
// by the clock it is given).
func NewOn(t testing.TB, clk *Clock, stores []driver.Store, s kvbreaker.Settings) *Fleet {
	t.Helper()
	f := &Fleet{Clock: clk, Tr: &Transitions{}}
	s.Clock, s.OnStateChange, s.SkipClockCheck = f.Clock.Now, f.Tr.Record, true
	for _, st := range stores {
		b, err := kvbreaker.New(st, s)
		if err != nil {
			t.Fatal(err)
		}
		f.Breakers = append(f.Breakers, b)
	}
	return f
}

// Concurrently runs n calls spread over the fleet's Breakers, released at
// once.
func (f *Fleet) Concurrently(n int, call func(i int, b *kvbreaker.Breaker)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			call(i, f.Breakers[i%len(f.Breakers)])
		})
	}
	close(start)
	wg.Wait()
}

// AllowAll makes n Allows for host at once and counts the decisions; it
// returns a Breaker that was told Probe, if one was.
func (f *Fleet) AllowAll(t testing.TB, host string, n int) (map[kvbreaker.Decision]int, *kvbreaker.Breaker) {
	t.Helper()
	var mu sync.Mutex
	got := map[kvbreaker.Decision]int{}
	var prober *kvbreaker.Breaker
	f.Concurrently(n, func(_ int, b *kvbreaker.Breaker) {
		v, err := b.Allow(t.Context(), host, time.Time{})
		if err != nil {
			t.Errorf("Allow: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		got[v.Decision]++
		if v.Decision == kvbreaker.Probe {
			prober = b
		}
	})
	return got, prober
}
