package kvbreaker_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
)

// TestAbandonReportsToObserver: Breaker.Abandon tells the Observer what it
// did with a probe: Released when it gave the claim back, not Released when
// the claim was already gone (here, given back by the first call), and
// nothing at all for a verdict that is not a probe, which it ignores.
func TestAbandonReportsToObserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu  sync.Mutex
			got []kvbreaker.AbandonInfo
		)
		s := kvbreaker.Settings{FailureThreshold: 2, Observer: &kvbreaker.Observer{
			Abandon: func(_ context.Context, a kvbreaker.AbandonInfo) {
				mu.Lock()
				got = append(got, a)
				mu.Unlock()
			},
		}}
		b := newBreaker(t, memory.New(), s)
		openHost(t, b, 2)
		if v := mustAllow(t, b, time.Time{}); v.Decision == kvbreaker.Probe {
			t.Fatalf("open circuit before RecoveryDelay: %v", v.Decision)
		} else if err := b.Abandon(t.Context(), host, v); err != nil {
			t.Fatal(err)
		}
		time.Sleep(defaults.RecoveryDelay)
		v := mustAllow(t, b, time.Time{})
		if v.Decision != kvbreaker.Probe {
			t.Fatalf("%v after RecoveryDelay, want probe", v.Decision)
		}
		for range 2 {
			if err := b.Abandon(t.Context(), host, v); err != nil {
				t.Fatal(err)
			}
		}
		want := []kvbreaker.AbandonInfo{{Host: host, Released: true}, {Host: host, Released: false}}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(got, want) {
			t.Errorf("Observer.Abandon saw %+v, want %+v", got, want)
		}
	})
}
