package cloudflarekv

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
)

// TestBreakerEndToEnd runs two workers (two stores: separate caches and
// write queues, like two processes) with Breakers on Miniflare's clock:
// worker A's failures open the circuit, worker B sees it within its cache
// freshness, the probe goes out once the recovery delay has passed on the
// simulator's clock, and its success closes the circuit for both.
func TestBreakerEndToEnd(t *testing.T) {
	ctx := t.Context()
	const host = "e2e.example"
	sa := newStore(t, WithCache(100, 200*time.Millisecond))
	sb := sibling(t, sa, WithCache(100, 200*time.Millisecond))
	var mu sync.Mutex
	var transitions []string
	settings := kvbreaker.Settings{
		FailureThreshold: 3,
		FailureWindow:    time.Minute,
		RecoveryDelay:    2 * time.Minute,
		Clock:            srv.Now,
		CallTimeout:      10 * time.Second,
		Logger:           quiet,
		OnStateChange: func(_ string, from, to kvbreaker.State) {
			mu.Lock()
			transitions = append(transitions, from.String()+"→"+to.String())
			mu.Unlock()
		},
	}
	a, err := kvbreaker.New(sa, settings)
	if err != nil {
		t.Fatal(err)
	}
	b, err := kvbreaker.New(sb, settings)
	if err != nil {
		t.Fatal(err)
	}
	allow := func(br *kvbreaker.Breaker) kvbreaker.Decision {
		t.Helper()
		v, err := br.Allow(ctx, host, time.Time{})
		if err != nil {
			t.Fatalf("Allow = %v", err)
		}
		return v.Decision
	}
	// Worker B reads the host first (and caches "no record").
	if d := allow(b); d != kvbreaker.Send {
		t.Fatalf("B before any failure: %v", d)
	}
	for i := range 3 {
		if err := a.Failure(ctx, host); err != nil {
			t.Fatalf("failure %d: %v", i, err)
		}
		if err := srv.Advance(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if d := allow(a); d != kvbreaker.Hold {
		t.Errorf("A after 3 failures: %v, want hold", d)
	}
	// B's cached "no record" is at most its freshness old.
	deadline := time.Now().Add(2 * time.Second)
	for allow(b) != kvbreaker.Hold {
		if time.Now().After(deadline) {
			t.Fatal("B never saw the open circuit")
		}
		time.Sleep(50 * time.Millisecond)
	}
	st, err := b.Inspect(ctx, host)
	if err != nil || st.State != kvbreaker.StateOpen || len(st.Failures) != 3 {
		t.Errorf("B inspects %+v, %v; want open with 3 failures", st, err)
	}
	// The record is in KV with a physical expiry past the logical one.
	keys, err := srv.List(ctx, sa.prefix+host)
	if err != nil || len(keys) != 1 {
		t.Fatalf("List = %v, %v", keys, err)
	}
	if logical := srv.Now().Add(a.StateTTL()); keys[0].Expiration < logical.Unix() {
		t.Errorf("physical expiration %d is before the logical expiry %v", keys[0].Expiration, logical)
	}

	if err := srv.Advance(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if d := allow(a); d != kvbreaker.Probe {
		t.Fatalf("A after the recovery delay: %v, want probe", d)
	}
	if err := a.Success(ctx, host); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(2 * time.Second)
	for allow(b) != kvbreaker.Send {
		if time.Now().After(deadline) {
			t.Fatal("B never saw the closed circuit")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, _, found, err := srv.RawGet(ctx, sa.prefix+host); err != nil || found {
		t.Errorf("record still in KV after the success: %v, %v", found, err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"closed→open", "open→half-open", "half-open→closed"}
	if !slices.Equal(transitions, want) {
		t.Errorf("transitions %v, want %v", transitions, want)
	}
}

// TestBreakerDo drives Breaker.Do, the form callers use, over the store: a
// failing delivery opens the circuit, and held deliveries are not run.
func TestBreakerDo(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	br, err := kvbreaker.New(s, kvbreaker.Settings{FailureThreshold: 2, Clock: countingClock(), CallTimeout: 10 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("connection refused")
	runs := 0
	deliver := func(context.Context) error { runs++; return boom }
	for range 2 {
		if err := br.Do(ctx, "do.example", deliver); !errors.Is(err, boom) {
			t.Fatalf("Do = %v", err)
		}
	}
	if err := br.Do(ctx, "do.example", deliver); !errors.Is(err, kvbreaker.ErrHeld) {
		t.Errorf("Do on an open circuit = %v, want ErrHeld", err)
	}
	if runs != 2 {
		t.Errorf("delivery ran %d times, want 2 (not while held)", runs)
	}
}
