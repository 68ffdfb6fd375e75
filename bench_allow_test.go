package kvbreaker_test

import (
	"context"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
)

// BenchmarkAllowClosed: a closed Allow over the memory store (one Get per
// call, no cache), without hooks, with an Observer that sets none, and with
// the OnStateChange and OnDrop shortcuts (which a closed Allow never calls).
// What the hooks cost when nothing is watching.
//
//	go test -run '^$' -bench 'Allow' -benchmem .
func BenchmarkAllowClosed(b *testing.B) {
	for _, bc := range []struct {
		name string
		s    kvbreaker.Settings
	}{
		{"none", kvbreaker.Settings{}},
		{"empty-observer", kvbreaker.Settings{Observer: &kvbreaker.Observer{}}},
		{"shortcuts", kvbreaker.Settings{
			OnStateChange: func(string, kvbreaker.State, kvbreaker.State) {},
			OnDrop:        func(string, time.Time) {},
		}},
		{"mirror", kvbreaker.Settings{Mirror: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			br := benchBreaker(b, bc.s)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if v, _ := br.Allow(ctx, host, time.Time{}); v.Decision != kvbreaker.Send {
					b.Fatal(v.Decision)
				}
			}
		})
	}
}

// BenchmarkAllowOpen: Allow on an open host (FailureThreshold 1, one
// Failure), reading the memory store, and deciding from the mirror.
//
//	go test -run '^$' -bench 'AllowOpen' -benchmem .
func BenchmarkAllowOpen(b *testing.B) {
	for _, bc := range []struct {
		name string
		s    kvbreaker.Settings
	}{
		{"store", kvbreaker.Settings{FailureThreshold: 1}},
		{"mirror", kvbreaker.Settings{FailureThreshold: 1, Mirror: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			br := benchBreaker(b, bc.s)
			ctx := context.Background()
			if err := br.Failure(ctx, host); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if v, _ := br.Allow(ctx, host, time.Time{}); v.Decision != kvbreaker.Hold {
					b.Fatal(v.Decision)
				}
			}
		})
	}
}

// benchBreaker is a Breaker over a new memory store; with Mirror, once its
// mirror decides.
func benchBreaker(tb testing.TB, s kvbreaker.Settings) *kvbreaker.Breaker {
	s.SkipClockCheck = true
	synced := make(chan struct{}, 1)
	if s.Mirror {
		s.Observer = kvbreaker.ComposeObservers(s.Observer, &kvbreaker.Observer{Mirror: func(_ context.Context, i kvbreaker.MirrorInfo) {
			if i.Healthy {
				select {
				case synced <- struct{}{}:
				default:
				}
			}
		}})
	}
	br, err := kvbreaker.New(memory.New(), s)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { br.Close(context.Background()) })
	if s.Mirror {
		<-synced
	}
	return br
}
