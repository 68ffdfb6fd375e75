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

// observer records every hook's call in e, times relative to t0.
func (e *events) observer(t0 time.Time) *kvbreaker.Observer {
	at := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.Sub(t0).String()
	}
	return &kvbreaker.Observer{
		Decision: func(ctx context.Context, d kvbreaker.DecisionInfo) {
			e.add("decision %s %v cached=%v retry=%s held=%s err=%v", d.Host, d.Decision, d.Cached, at(d.RetryAt), at(d.HeldSince), d.Err != nil)
		},
		Outcome: func(ctx context.Context, o kvbreaker.OutcomeInfo) {
			e.add("outcome %s %v err=%v", o.Host, o.Outcome, o.Err)
		},
		Transition: func(ctx context.Context, tr kvbreaker.TransitionInfo) {
			e.add("transition %s %v->%v", tr.Host, tr.From, tr.To)
		},
		StoreCall: func(ctx context.Context, c kvbreaker.StoreCallInfo) (context.Context, func(kvbreaker.StoreCallDoneInfo)) {
			ctx = context.WithValue(ctx, ctxKey{}, c.Op)
			return ctx, func(d kvbreaker.StoreCallDoneInfo) {
				if (d.Outcome == "ok") != (d.Err == nil) {
					e.add("outcome %s does not match error %v", d.Outcome, d.Err)
				}
				e.add("store %s %s %s", c.Op, c.Host, d.Outcome)
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
	// The shortcuts report through the same path as the Observer, first.
	s := kvbreaker.Settings{FailureThreshold: 2, RecoveryDelay: time.Minute, HoldLimit: time.Hour, Clock: clock, Observer: ev.observer(now),
		OnStateChange: func(h string, from, to kvbreaker.State) { ev.add("OnStateChange %s %v->%v", h, from, to) },
		OnDrop:        func(h string, since time.Time) { ev.add("OnDrop %s %v", h, now.Sub(since)) },
	}
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
		"store get inbox.example not_found", "decision inbox.example send cached=false retry=- held=- err=false")
	step("first failure", func() error { return b.Failure(ctx, host) },
		"store compare_and_swap inbox.example ok", "outcome inbox.example failure err=<nil>")
	step("failure that opens", func() error { return b.Failure(ctx, host) },
		"store compare_and_swap inbox.example ok",
		"OnStateChange inbox.example closed->open", "transition inbox.example closed->open",
		"outcome inbox.example failure err=<nil>")
	step("allow while open", allow(time.Time{}),
		"store get inbox.example ok", "decision inbox.example hold cached=false retry=1m0s held=0s err=false")
	step("drop", allow(now.Add(-2*time.Hour)),
		"OnDrop inbox.example 2h0m0s", "decision inbox.example drop cached=false retry=- held=-2h0m0s err=false")
	now = now.Add(2 * time.Minute)
	step("probe election", allow(time.Time{}),
		"store get inbox.example ok", "store compare_and_swap inbox.example ok",
		"OnStateChange inbox.example open->half-open", "transition inbox.example open->half-open",
		"decision inbox.example probe cached=false retry=- held=- err=false")
	step("reachable failure", func() error { return b.ReachableFailure(ctx, host) },
		"store compare_and_delete inbox.example ok",
		"OnStateChange inbox.example half-open->closed", "transition inbox.example half-open->closed",
		"outcome inbox.example reachable-failure err=<nil>")
	step("failure after the close", func() error { return b.Failure(ctx, host) },
		"store compare_and_swap inbox.example ok", "outcome inbox.example failure err=<nil>")
	// Another worker closes the circuit: this Breaker's hint is stale.
	if err := other.Success(ctx, host); err != nil {
		t.Fatal(err)
	}
	step("failure on a stale hint", func() error { return b.Failure(ctx, host) },
		"store compare_and_swap inbox.example conflict",
		"store compare_and_swap inbox.example ok", "outcome inbox.example failure err=<nil>")
	step("success", func() error { return b.Success(ctx, host) },
		"store compare_and_delete inbox.example ok", "outcome inbox.example success err=<nil>")
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Allow(canceled, host, time.Time{}); err == nil {
		t.Fatal("Allow on a canceled context: no error")
	}
	if got, want := ev.take(), []string{"store get inbox.example canceled", "decision inbox.example send cached=false retry=- held=- err=true"}; !slices.Equal(got, want) {
		t.Errorf("canceled Allow: hooks saw %q, want %q", got, want)
	}
	err := b.Failure(canceled, host)
	if got, want := ev.take(), []string{"store compare_and_swap inbox.example canceled", fmt.Sprintf("outcome inbox.example failure err=%v", err)}; err == nil || !slices.Equal(got, want) {
		t.Errorf("canceled Failure (%v): hooks saw %q, want %q", err, got, want)
	}
}

// TestObserverCached: with the decision cache on, a repeated Allow on a
// closed host is reported cached and makes no store call.
func TestObserverCached(t *testing.T) {
	ctx := context.Background()
	var ev events
	b := newBreaker(t, memory.New(), kvbreaker.Settings{CacheSize: 10, Observer: ev.observer(time.Time{})})
	for range 2 {
		if _, err := b.Allow(ctx, host, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"store get inbox.example not_found", "decision inbox.example send cached=false retry=- held=- err=false", "decision inbox.example send cached=true retry=- held=- err=false"}
	if got := ev.take(); !slices.Equal(got, want) {
		t.Errorf("hooks saw %q, want %q", got, want)
	}
}

// TestObserverContext: the store sees the context StoreCall returned.
func TestObserverContext(t *testing.T) {
	var seen []any
	store := &spyStore{Store: memory.New(), seen: &seen}
	b := newBreaker(t, store, kvbreaker.Settings{Observer: &kvbreaker.Observer{
		StoreCall: func(ctx context.Context, c kvbreaker.StoreCallInfo) (context.Context, func(kvbreaker.StoreCallDoneInfo)) {
			return context.WithValue(ctx, ctxKey{}, c.Op), nil
		},
	}})
	if err := b.Failure(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Allow(context.Background(), host, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if want := []any{"compare_and_swap", "get"}; !slices.Equal(seen, want) {
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

// TestAllowShortcutsAllocateNothing: with OnStateChange and OnDrop set,
// which New composes into the Breaker's Observer, a closed Allow still
// allocates nothing.
func TestAllowShortcutsAllocateNothing(t *testing.T) {
	ctx := context.Background()
	b := newBreaker(t, memory.New(), kvbreaker.Settings{
		OnStateChange: func(string, kvbreaker.State, kvbreaker.State) {},
		OnDrop:        func(string, time.Time) {},
	})
	b.Allow(ctx, host, time.Time{})
	if n := testing.AllocsPerRun(1000, func() { b.Allow(ctx, host, time.Time{}) }); n != 0 {
		t.Errorf("closed Allow with the shortcuts set made %v allocations per call", n)
	}
}

// TestObserverCopied: New takes a copy of the Observer and ComposeObservers
// changes none of its arguments, so one Observer may serve many Breakers
// with different shortcuts.
func TestObserverCopied(t *testing.T) {
	ctx := context.Background()
	var ev events
	obs := ev.observer(time.Time{})
	decision := obs.Decision
	drops := 0
	withDrop := newBreaker(t, memory.New(), kvbreaker.Settings{HoldLimit: time.Hour, Observer: obs,
		OnDrop: func(string, time.Time) { drops++ }})
	plain := newBreaker(t, memory.New(), kvbreaker.Settings{HoldLimit: time.Hour, Observer: obs})
	composed := kvbreaker.ComposeObservers(obs, &kvbreaker.Observer{Decision: func(context.Context, kvbreaker.DecisionInfo) {}})
	if obs.Decision == nil || fmt.Sprintf("%p", obs.Decision) != fmt.Sprintf("%p", decision) || composed == obs {
		t.Fatal("ComposeObservers or New changed the Observer given")
	}
	long := time.Now().Add(-2 * time.Hour)
	for _, b := range []*kvbreaker.Breaker{withDrop, plain} {
		if v, _ := b.Allow(ctx, host, long); v.Decision != kvbreaker.Drop {
			t.Fatalf("Allow held for 2h with a 1h HoldLimit: %v", v.Decision)
		}
	}
	if drops != 1 {
		t.Errorf("OnDrop called %d times across a Breaker with it and one without, want 1", drops)
	}
	if got := ev.take(); len(got) != 2 {
		t.Errorf("the shared Observer saw %q, want both drops", got)
	}
}
