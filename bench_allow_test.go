package kvbreaker_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
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
		// A store the Breaker checks the clock of in the background, as
		// it does every remote store's.
		{"mirror-remote", kvbreaker.Settings{Mirror: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			br := benchBreaker(b, bc.s, bc.name == "mirror-remote")
			ctx := context.Background()
			b.ReportAllocs()
			loopCPU(b, func() {
				if v, _ := br.Allow(ctx, host, time.Time{}); v.Decision != kvbreaker.Send {
					b.Fatal(v.Decision)
				}
			})
		})
	}
}

// BenchmarkAllowOpen: Allow on an open host (FailureThreshold 1, one
// Failure), reading the memory store, and deciding from the mirror (over
// the memory store, and over one presented as remote).
//
//	go test -run '^$' -bench 'AllowOpen' -benchmem .
func BenchmarkAllowOpen(b *testing.B) {
	for _, bc := range []struct {
		name string
		s    kvbreaker.Settings
	}{
		{"store", kvbreaker.Settings{FailureThreshold: 1}},
		{"mirror", kvbreaker.Settings{FailureThreshold: 1, Mirror: true}},
		{"mirror-remote", kvbreaker.Settings{FailureThreshold: 1, Mirror: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			br := benchBreaker(b, bc.s, bc.name == "mirror-remote")
			ctx := context.Background()
			if err := br.Failure(ctx, host); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			loopCPU(b, func() {
				if v, _ := br.Allow(ctx, host, time.Time{}); v.Decision != kvbreaker.Hold {
					b.Fatal(v.Decision)
				}
			})
		})
	}
}

// loopCPU runs f in b.Loop on one OS thread and reports, beside ns/op,
// the thread's CPU time per call (cpu-ns/op), which a shared machine's
// waits for a CPU do not inflate.
func loopCPU(b *testing.B, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0, ok := threadCPU()
	for b.Loop() {
		f()
	}
	if c1, ok1 := threadCPU(); ok && ok1 {
		b.ReportMetric(float64(c1-c0)/float64(b.N), "cpu-ns/op")
	}
}

// remoteMemory is a memory store presented as a remote one that can show
// its clock: a Breaker over it checks that clock in the background, as over
// etcd, Redis or PostgreSQL, and makes no other request while its mirror
// decides.
type remoteMemory struct{ *memory.Store }

func (s remoteMemory) Traits() driver.Traits {
	t := s.Store.Traits()
	t.InProcess = false
	return t
}

func (remoteMemory) SampleClock(context.Context) (time.Time, time.Duration, error) {
	return time.Now(), 0, nil
}

// benchBreaker is a Breaker over a new memory store (presented as remote:
// remoteMemory); with Mirror, once its mirror decides.
func benchBreaker(tb testing.TB, s kvbreaker.Settings, remote bool) *kvbreaker.Breaker {
	var store driver.Store = memory.New()
	if remote {
		store = remoteMemory{memory.New()}
	} else {
		s.SkipClockCheck = true
	}
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
	br, err := kvbreaker.New(store, s)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { br.Close(context.Background()) })
	if s.Mirror {
		<-synced
	}
	return br
}
