package redis_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker"
)

// fakeClock is the fleet's clock in the Breaker tests: decisions run on it,
// while the records' TTLs (minutes) run on Redis's clock and outlast the
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

func (tr *transitions) record(_ string, from, to kvbreaker.State) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.n[fmt.Sprintf("%s→%s", from, to)]++
}

func (tr *transitions) take() map[string]int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := tr.n
	tr.n = map[string]int{}
	return n
}

func wantTransitions(t *testing.T, tr *transitions, want map[string]int) {
	t.Helper()
	if got := tr.take(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("transitions %v, want %v", got, want)
	}
}

// fleet is workers Breakers, each with its own client (as separate
// processes would have), sharing one key prefix.
type fleet struct {
	breakers []*kvbreaker.Breaker
	clock    *fakeClock
	tr       *transitions
}

func newFleet(t *testing.T, workers int, client func() goredis.UniversalClient, s kvbreaker.Settings) *fleet {
	t.Helper()
	f := &fleet{clock: newFakeClock(), tr: &transitions{n: map[string]int{}}}
	prefix := uniquePrefix(t)
	s.Clock = f.clock.Now
	s.OnStateChange = f.tr.record
	for range workers {
		b, err := kvbreaker.New(newStoreUnder(t, client(), prefix), s)
		if err != nil {
			t.Fatal(err)
		}
		f.breakers = append(f.breakers, b)
	}
	return f
}

// concurrently runs one call per breaker at once.
func (f *fleet) concurrently(call func(b *kvbreaker.Breaker)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, b := range f.breakers {
		wg.Go(func() {
			<-start
			call(b)
		})
	}
	close(start)
	wg.Wait()
}

// allowAll asks every worker at once and counts the decisions.
func (f *fleet) allowAll(t *testing.T, host string) (map[kvbreaker.Decision]int, *kvbreaker.Breaker) {
	t.Helper()
	var mu sync.Mutex
	got := map[kvbreaker.Decision]int{}
	var prober *kvbreaker.Breaker
	f.concurrently(func(b *kvbreaker.Breaker) {
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

// runFleet drives 64 workers through a circuit's life on each host: all
// fail at once (exactly one closed→open), hold, one probe per restraint
// (fails: reopens; again: succeeds, closes).
func runFleet(t *testing.T, client func() goredis.UniversalClient, hosts ...string) {
	const (
		workers  = 64
		recovery = 10 * time.Minute
	)
	f := newFleet(t, workers, client, kvbreaker.Settings{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: recovery})
	ctx := t.Context()
	for _, host := range hosts {
		if got, _ := f.allowAll(t, host); got[kvbreaker.Send] != workers {
			t.Fatalf("%s: closed circuit decisions %v, want %d sends", host, got, workers)
		}
		f.concurrently(func(b *kvbreaker.Breaker) {
			if err := b.Failure(ctx, host); err != nil {
				t.Errorf("Failure: %v", err)
			}
		})
		wantTransitions(t, f.tr, map[string]int{"closed→open": 1})
		if got, _ := f.allowAll(t, host); got[kvbreaker.Hold] != workers {
			t.Fatalf("%s: open circuit decisions %v, want %d holds", host, got, workers)
		}
	}
	f.clock.Advance(recovery + time.Second)
	for _, host := range hosts {
		got, prober := f.allowAll(t, host)
		if got[kvbreaker.Probe] != 1 || got[kvbreaker.Hold] != workers-1 {
			t.Fatalf("%s: after the recovery delay decisions %v, want 1 probe and %d holds", host, got, workers-1)
		}
		wantTransitions(t, f.tr, map[string]int{"open→half-open": 1})
		if err := prober.Failure(ctx, host); err != nil {
			t.Fatal(err)
		}
		wantTransitions(t, f.tr, map[string]int{"half-open→open": 1})
	}
	f.clock.Advance(recovery + time.Second)
	for _, host := range hosts {
		got, prober := f.allowAll(t, host)
		if got[kvbreaker.Probe] != 1 || got[kvbreaker.Hold] != workers-1 {
			t.Fatalf("%s: second probe round decisions %v, want 1 probe", host, got)
		}
		wantTransitions(t, f.tr, map[string]int{"open→half-open": 1})
		if err := prober.Success(ctx, host); err != nil {
			t.Fatal(err)
		}
		wantTransitions(t, f.tr, map[string]int{"half-open→closed": 1})
		if got, _ := f.allowAll(t, host); got[kvbreaker.Send] != workers {
			t.Errorf("%s: closed again: decisions %v, want all sends", host, got)
		}
	}
}

func TestBreakerFleet(t *testing.T) {
	runFleet(t, func() goredis.UniversalClient { return newClient(t, srv.Addr()) }, "inbox.example", "mx.example")
}
