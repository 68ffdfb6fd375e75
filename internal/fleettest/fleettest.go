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
	// Settings are the Breakers' settings, as given (zero: the default;
	// a zero CallTimeout is 30 s).
	Settings kvbreaker.Settings
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
	if s.CallTimeout == 0 {
		// A fleet pins decisions, not latency: 64 workers on a real
		// server of a loaded machine waited longer than the default 5 s
		// for their store, and Allow reported the timeout as a failure.
		s.CallTimeout = 30 * time.Second
	}
	f.Settings = s
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

// Cycle drives the fleet through a circuit's life on host, callers calls
// at a time spread over the workers, and fails t at the first step that
// goes wrong:
//
//   - closed: every call is told Send;
//   - callers Failures at once open the circuit exactly once, with
//     FailureThreshold failures in its record;
//   - open: every worker holds until the restraint ends, and a Failure
//     writes nothing (the record's version stays);
//   - at the restraint's end exactly one of callers Allows is told Probe;
//     a Failure, from a worker other than the prober, reopens at once and
//     every call holds again;
//   - at the next restraint's end exactly one probes again; the others hold
//     until the release interval; the probe's Success closes the circuit,
//     deletes the record, and every call is told Send; Successes on the
//     closed circuit report nothing.
//
// Each transition must be reported once across the fleet. The settings
// need a FailureThreshold below callers.
func (f *Fleet) Cycle(t testing.TB, host string, callers int) {
	t.Helper()
	ctx := t.Context()
	if got, _ := f.AllowAll(t, host, callers); got[kvbreaker.Send] != callers {
		t.Fatalf("%s closed: decisions %v, want %d sends", host, got, callers)
	}
	f.Concurrently(callers, func(_ int, b *kvbreaker.Breaker) {
		if err := b.Failure(ctx, host); err != nil {
			t.Errorf("%s: Failure: %v", host, err)
		}
	})
	f.Tr.Want(t, map[string]int{"closed→open": 1})
	st := f.inspectOpen(t, host, "after the failures")
	if n := f.Settings.FailureThreshold; n > 0 && len(st.Failures) != n {
		t.Errorf("%s opened with %d failures in its record, want the threshold %d", host, len(st.Failures), n)
	}
	for i, b := range f.Breakers {
		v, err := b.Allow(ctx, host, time.Time{})
		if err != nil || v.Decision != kvbreaker.Hold || !v.RetryAt.Equal(st.RestrainedUntil) {
			t.Fatalf("%s open: worker %d: %+v, %v; want hold until %v", host, i, v, err, st.RestrainedUntil)
		}
	}
	if err := f.Breakers[len(f.Breakers)-1].Failure(ctx, host); err != nil {
		t.Fatal(err)
	}
	if again, err := f.Breakers[0].Inspect(ctx, host); err != nil || again.Version != st.Version {
		t.Errorf("%s: a Failure on the open circuit rewrote its record: version %d → %d (%v)", host, st.Version, again.Version, err)
	}
	f.Tr.Want(t, map[string]int{})

	prober := f.elect(t, host, callers, st.RestrainedUntil, "first probe")
	if err := f.other(prober).Failure(ctx, host); err != nil {
		t.Fatal(err)
	}
	f.Tr.Want(t, map[string]int{"half-open→open": 1})
	if got, _ := f.AllowAll(t, host, callers); got[kvbreaker.Hold] != callers {
		t.Fatalf("%s reopened: decisions %v, want %d holds", host, got, callers)
	}
	st = f.inspectOpen(t, host, "after the probe failed")

	prober = f.elect(t, host, callers, st.RestrainedUntil, "second probe")
	release := f.Settings.ReleaseInterval
	if release == 0 {
		release = kvbreaker.Settings{}.WithDefaults().ReleaseInterval
	}
	if v, err := f.other(prober).Allow(ctx, host, time.Time{}); err != nil || v.Decision != kvbreaker.Hold || !v.RetryAt.Equal(f.Clock.Now().Add(release)) {
		t.Errorf("%s half-open: Allow = %+v, %v; want hold for the release interval %v", host, v, err, release)
	}
	if err := prober.Success(ctx, host); err != nil {
		t.Fatal(err)
	}
	f.Tr.Want(t, map[string]int{"half-open→closed": 1})
	if st, err := f.other(prober).Inspect(ctx, host); err != nil || st.Found {
		t.Errorf("%s after the probe's success: Inspect = %+v, %v; want no record", host, st, err)
	}
	if got, _ := f.AllowAll(t, host, callers); got[kvbreaker.Send] != callers {
		t.Errorf("%s closed again: decisions %v, want %d sends", host, got, callers)
	}
	f.Concurrently(callers, func(_ int, b *kvbreaker.Breaker) {
		if err := b.Success(ctx, host); err != nil {
			t.Errorf("%s: Success: %v", host, err)
		}
	})
	f.Tr.Want(t, map[string]int{})
}

// inspectOpen returns host's record, failing t unless it is open.
func (f *Fleet) inspectOpen(t testing.TB, host, when string) kvbreaker.Status {
	t.Helper()
	st, err := f.Breakers[0].Inspect(t.Context(), host)
	if err != nil || !st.Found || st.State != kvbreaker.StateOpen {
		t.Fatalf("%s %s: Inspect = %+v, %v; want open", host, when, st, err)
	}
	return st
}

// elect moves the clock to until, the restraint's end, and fails t unless
// exactly one of callers Allows is told Probe; it returns that Breaker.
func (f *Fleet) elect(t testing.TB, host string, callers int, until time.Time, step string) *kvbreaker.Breaker {
	t.Helper()
	f.Clock.Set(until)
	got, prober := f.AllowAll(t, host, callers)
	if got[kvbreaker.Probe] != 1 || got[kvbreaker.Hold] != callers-1 {
		t.Fatalf("%s %s at the restraint's end: decisions %v, want 1 probe and %d holds", host, step, got, callers-1)
	}
	f.Tr.Want(t, map[string]int{"open→half-open": 1})
	return prober
}

// other returns a Breaker of the fleet other than b (b itself in a fleet
// of one).
func (f *Fleet) other(b *kvbreaker.Breaker) *kvbreaker.Breaker {
	for _, o := range f.Breakers {
		if o != b {
			return o
		}
	}
	return b
}
