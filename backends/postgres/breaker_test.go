package postgres_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/postgres"
)

// fakeClock is the fleet's clock in the Breaker tests: decisions run on it,
// while the records' TTLs (minutes) run on PostgreSQL's clock and outlast the
// test.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Now().Truncate(time.Millisecond).UnixNano())
	return c
}
func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// transitions records OnStateChange calls across a fleet.
type transitions struct {
	mu sync.Mutex
	n  map[string]int
}

func (tr *transitions) record(host string, from, to kvbreaker.State) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.n[fmt.Sprintf("%s→%s", from, to)]++
}

// take returns the counts so far and resets them.
func (tr *transitions) take() map[string]int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := tr.n
	tr.n = map[string]int{}
	return n
}

func wantTransitions(t *testing.T, tr *transitions, want map[string]int) {
	t.Helper()
	got := tr.take()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("transitions %v, want %v", got, want)
	}
}

// fleet is several workers, each with its own pool, Store and Breaker,
// sharing one key prefix.
type fleet struct {
	breakers []*kvbreaker.Breaker
	stores   []prefixedStore
	clock    *fakeClock
	tr       *transitions
}

func newFleet(t *testing.T, workers int, s kvbreaker.Settings) *fleet {
	t.Helper()
	f := &fleet{clock: newFakeClock(), tr: &transitions{n: map[string]int{}}}
	prefix := uniquePrefix(t)
	s.Clock = f.clock.Now
	s.OnStateChange = f.tr.record
	for range workers {
		st := isolate(t, newWorkerStore(t), prefix)
		b, err := kvbreaker.New(st, s)
		if err != nil {
			t.Fatal(err)
		}
		f.stores = append(f.stores, st)
		f.breakers = append(f.breakers, b)
	}
	return f
}

// concurrently runs n calls spread over the fleet's breakers at once.
func (f *fleet) concurrently(n int, call func(i int, b *kvbreaker.Breaker)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			call(i, f.breakers[i%len(f.breakers)])
		})
	}
	close(start)
	wg.Wait()
}

// allowAll asks every worker n times at once and counts the decisions.
func (f *fleet) allowAll(t *testing.T, host string, n int) (map[kvbreaker.Decision]int, *kvbreaker.Breaker) {
	t.Helper()
	var mu sync.Mutex
	got := map[kvbreaker.Decision]int{}
	var prober *kvbreaker.Breaker
	f.concurrently(n, func(_ int, b *kvbreaker.Breaker) {
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

// TestBreakerFleetOverPostgres: 64 workers, each with a pool of its own as a
// separate process would have, share one host's record: 64 concurrent
// failures open it exactly once, and each restraint elects exactly one
// probe among 64 concurrent asks.
func TestBreakerFleetOverPostgres(t *testing.T) {
	const (
		workers   = 64
		callers   = 64 // goroutines per phase, spread over the workers
		host      = "inbox.example"
		recovery  = 10 * time.Minute
		threshold = 3
	)
	f := newFleet(t, workers, kvbreaker.Settings{FailureThreshold: threshold, FailureWindow: time.Minute, RecoveryDelay: recovery})
	ctx := t.Context()

	// Closed: everyone sends, nothing is written.
	if got, _ := f.allowAll(t, host, callers); got[kvbreaker.Send] != callers {
		t.Fatalf("closed circuit decisions %v, want %d sends", got, callers)
	}

	// 24 goroutines fail at once: exactly one closed→open, no errors.
	f.concurrently(callers, func(_ int, b *kvbreaker.Breaker) {
		if err := b.Failure(ctx, host); err != nil {
			t.Errorf("Failure: %v", err)
		}
	})
	wantTransitions(t, f.tr, map[string]int{"closed→open": 1})
	st, err := f.breakers[0].Inspect(ctx, host)
	if err != nil || !st.Found || st.State != kvbreaker.StateOpen {
		t.Fatalf("after the failures Inspect = %+v, %v; want open", st, err)
	}
	opened := st.RestrainedUntil.Add(-recovery)

	// Open: every worker holds until the recovery delay has passed.
	for i, b := range f.breakers {
		v, err := b.Allow(ctx, host, time.Time{})
		if err != nil || v.Decision != kvbreaker.Hold || !v.RetryAt.Equal(opened.Add(recovery)) {
			t.Errorf("worker %d on an open circuit: %+v, %v; want hold until %v", i, v, err, opened.Add(recovery))
		}
	}
	// Failures while open change nothing.
	_, before, _ := f.stores[0].Get(ctx, host)
	if err := f.breakers[0].Failure(ctx, host); err != nil {
		t.Fatal(err)
	}
	if _, after, _ := f.stores[0].Get(ctx, host); after != before {
		t.Errorf("a failure on an open circuit wrote: version %d → %d", before, after)
	}
	wantTransitions(t, f.tr, map[string]int{})

	// Recovery delay passes: of 24 concurrent asks, exactly one probes.
	f.clock.Advance(recovery + time.Second)
	got, prober := f.allowAll(t, host, callers)
	if got[kvbreaker.Probe] != 1 || got[kvbreaker.Hold] != callers-1 {
		t.Fatalf("after the recovery delay decisions %v, want 1 probe and %d holds", got, callers-1)
	}
	wantTransitions(t, f.tr, map[string]int{"open→half-open": 1})

	// The probe fails: a single strike reopens.
	if err := prober.Failure(ctx, host); err != nil {
		t.Fatal(err)
	}
	wantTransitions(t, f.tr, map[string]int{"half-open→open": 1})

	// Again after the delay: one probe; it succeeds and the circuit closes.
	f.clock.Advance(recovery + time.Second)
	got, prober = f.allowAll(t, host, callers)
	if got[kvbreaker.Probe] != 1 || got[kvbreaker.Hold] != callers-1 {
		t.Fatalf("second probe round decisions %v, want 1 probe", got)
	}
	wantTransitions(t, f.tr, map[string]int{"open→half-open": 1})
	// While the probe is out, others hold and re-check at the release
	// interval.
	v, err := f.breakers[1].Allow(ctx, host, time.Time{})
	if err != nil || v.Decision != kvbreaker.Hold || !v.RetryAt.Equal(f.clock.Now().Add(kvbreaker.DefaultReleaseInterval)) {
		t.Errorf("half-open Allow = %+v, %v; want hold for the release interval", v, err)
	}
	if err := prober.Success(ctx, host); err != nil {
		t.Fatal(err)
	}
	wantTransitions(t, f.tr, map[string]int{"half-open→closed": 1})
	if st, err := f.breakers[2].Inspect(ctx, host); err != nil || st.Found {
		t.Errorf("after success Inspect = %+v, %v; want no record", st, err)
	}
	if got, _ := f.allowAll(t, host, callers); got[kvbreaker.Send] != callers {
		t.Errorf("closed again: decisions %v, want all sends", got)
	}
	// Successes on a closed circuit write nothing.
	f.concurrently(callers, func(_ int, b *kvbreaker.Breaker) {
		if err := b.Success(ctx, host); err != nil {
			t.Errorf("Success: %v", err)
		}
	})
	wantTransitions(t, f.tr, map[string]int{})
}

// newWorkerStore returns a Store with a small pool of its own (64 of them
// stay within the server's connections).
func newWorkerStore(t *testing.T) *postgres.Store {
	t.Helper()
	s, err := postgres.New(newPool(t, server.URL()+"&pool_max_conns=2"), table)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
