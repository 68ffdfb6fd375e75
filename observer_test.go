package kvbreaker_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
)

// events records an Observer's calls as one line each.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, fmt.Sprintf(format, args...))
}

// take returns the events since the last take.
func (e *events) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	got := e.got
	e.got = nil
	return got
}

type ctxKey struct{}

func (e *events) observer() *kvbreaker.Observer {
	return &kvbreaker.Observer{
		Decision: func(ctx context.Context, host string, d kvbreaker.Decision, cached bool) {
			e.add("decision %s %v cached=%v", host, d, cached)
		},
		Transition: func(ctx context.Context, host string, from, to kvbreaker.State) {
			e.add("transition %s %v->%v", host, from, to)
		},
		StoreCall: func(ctx context.Context, op kvbreaker.StoreOp, host string) (context.Context, func(kvbreaker.StoreOutcome, error)) {
			ctx = context.WithValue(ctx, ctxKey{}, op)
			return ctx, func(o kvbreaker.StoreOutcome, err error) {
				if (o == kvbreaker.OutcomeOK) != (err == nil) {
					e.add("outcome %s does not match error %v", o, err)
				}
				e.add("store %s %s %s", op, host, o)
			}
		},
	}
}

// spyStore notes the ctxKey value of every call's context.
type spyStore struct {
	*memory.Store
	seen *[]any
}

func (s *spyStore) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	*s.seen = append(*s.seen, ctx.Value(ctxKey{}))
	return s.Store.Get(ctx, key)
}

func (s *spyStore) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	*s.seen = append(*s.seen, ctx.Value(ctxKey{}))
	return s.Store.CompareAndSwap(ctx, key, old, value, ttl)
}

// TestObserverScript runs a host through a whole cycle and checks every
// hook call, in order.
func TestObserverScript(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	var ev events
	store := memory.New()
	s := kvbreaker.Settings{FailureThreshold: 2, RecoveryDelay: time.Minute, HoldLimit: time.Hour, Clock: clock, Observer: ev.observer()}
	b := newBreaker(t, store, s)
	other := newBreaker(t, store, kvbreaker.Settings{FailureThreshold: 2, RecoveryDelay: time.Minute, Clock: clock})

	step := func(name string, f func() error, want ...string) {
		t.Helper()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := ev.take(); !slices.Equal(got, want) {
			t.Errorf("%s: hooks saw\n\t%s\nwant\n\t%s", name, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
		}
	}
	allow := func(heldSince time.Time) func() error {
		return func() error { _, err := b.Allow(ctx, host, heldSince); return err }
	}
	step("allow on an absent record", allow(time.Time{}),
		"store get inbox.example not_found", "decision inbox.example send cached=false")
	step("first failure", func() error { return b.Failure(ctx, host) },
		"store compare_and_swap inbox.example ok")
	step("failure that opens", func() error { return b.Failure(ctx, host) },
		"store compare_and_swap inbox.example ok", "transition inbox.example closed->open")
	step("allow while open", allow(time.Time{}),
		"store get inbox.example ok", "decision inbox.example hold cached=false")
	step("drop", allow(now.Add(-2*time.Hour)), "decision inbox.example drop cached=false")
	now = now.Add(2 * time.Minute)
	step("probe election", allow(time.Time{}),
		"store get inbox.example ok", "store compare_and_swap inbox.example ok",
		"transition inbox.example open->half-open", "decision inbox.example probe cached=false")
	// Another worker closes the circuit: this Breaker's hint is stale.
	if err := other.Success(ctx, host); err != nil {
		t.Fatal(err)
	}
	step("failure on a stale hint", func() error { return b.Failure(ctx, host) },
		"store compare_and_swap inbox.example conflict",
		"store compare_and_swap inbox.example ok")
	step("success", func() error { return b.Success(ctx, host) },
		"store compare_and_delete inbox.example ok")
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Allow(canceled, host, time.Time{}); err == nil {
		t.Fatal("Allow on a canceled context: no error")
	}
	if got, want := ev.take(), []string{"store get inbox.example canceled", "decision inbox.example send cached=false"}; !slices.Equal(got, want) {
		t.Errorf("canceled Allow: hooks saw %q, want %q", got, want)
	}
}

// TestObserverCached: with the decision cache on, a repeated Allow on a
// closed host is reported cached and makes no store call.
func TestObserverCached(t *testing.T) {
	ctx := context.Background()
	var ev events
	b := newBreaker(t, memory.New(), kvbreaker.Settings{CacheSize: 10, Observer: ev.observer()})
	for range 2 {
		if _, err := b.Allow(ctx, host, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"store get inbox.example not_found", "decision inbox.example send cached=false", "decision inbox.example send cached=true"}
	if got := ev.take(); !slices.Equal(got, want) {
		t.Errorf("hooks saw %q, want %q", got, want)
	}
}

// TestObserverContext: the store sees the context StoreCall returned.
func TestObserverContext(t *testing.T) {
	var seen []any
	store := &spyStore{Store: memory.New(), seen: &seen}
	b := newBreaker(t, store, kvbreaker.Settings{Observer: &kvbreaker.Observer{
		StoreCall: func(ctx context.Context, op kvbreaker.StoreOp, host string) (context.Context, func(kvbreaker.StoreOutcome, error)) {
			return context.WithValue(ctx, ctxKey{}, op), nil
		},
	}})
	if err := b.Failure(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Allow(context.Background(), host, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if want := []any{kvbreaker.OpCompareAndSwap, kvbreaker.OpGet}; !slices.Equal(seen, want) {
		t.Errorf("store calls saw context values %v, want %v", seen, want)
	}
}

// TestAllowObserverNilFieldsAllocatesNothing: an Observer with no hooks set
// costs the closed Allow no allocation.
func TestAllowObserverNilFieldsAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	b := newBreaker(t, memory.New(), kvbreaker.Settings{Observer: &kvbreaker.Observer{}})
	b.Allow(ctx, host, time.Time{})
	if n := testing.AllocsPerRun(1000, func() { b.Allow(ctx, host, time.Time{}) }); n != 0 {
		t.Errorf("closed Allow with an empty Observer made %v allocations per call", n)
	}
}
