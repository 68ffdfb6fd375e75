package bench

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
)

// mirrorBackends are the stores a mirror can follow, memory first: the
// column benchstat divides the others by. SQLite's follower polls the file
// (every 50 ms by default), so its mirror lags by up to a poll, but a
// decision from it is the same lookup as from any other feed. NATS follows
// through a JetStream consumer of the bucket's subjects, delivering values.
var mirrorBackends = []string{"memory", "etcd", "redis", "postgres", "nats", "sqlite"}

// BenchmarkMirrorAllow is Allow with a healthy mirror (Settings.Mirror) on
// a closed host (no record) and an open one, over each store that can
// follow, in one run. Another worker (a Breaker over a store of its own)
// opens the open host, as a fleet's circuits open, and the loop starts
// once the change has reached the mirror: on a feed of invalidations
// (Redis, PostgreSQL) the first Allow after it reads the store once, and
// is not timed. With the mirror deciding, Allow makes no store request on
// any of them, so the stores should cost the same as memory (target ≤
// 1.5×, 0 allocations):
//
//	go test ./bench -run '^$' -bench MirrorAllow -benchmem -count 6 > /tmp/mirror.txt
//	go tool benchstat -col /store /tmp/mirror.txt
//
// A store call during the loop (the mirror stopped deciding: a late
// heartbeat on a loaded machine) fails the benchmark rather than mix reads
// into the figure.
func BenchmarkMirrorAllow(b *testing.B) {
	for _, state := range []string{"closed", "open"} {
		for _, name := range mirrorBackends {
			b.Run("host="+state+"/store="+name, func(b *testing.B) {
				ctx := b.Context()
				// st is the measured Breaker's store, other the other
				// worker's: the same keyspace.
				var st, other driver.Store
				if name == "memory" {
					m := memory.New()
					b.Cleanup(func() { m.Close() })
					st, other = m, m
				} else {
					r := newRig(b, name)
					st, other = r.open().raw, r.open().raw
				}
				healthy := make(chan struct{}, 1)
				var calls atomic.Int64
				obs := &kvbreaker.Observer{
					Mirror: func(_ context.Context, e kvbreaker.MirrorInfo) {
						if e.Healthy {
							select {
							case healthy <- struct{}{}:
							default:
							}
						}
					},
					StoreCall: func(ctx context.Context, _ kvbreaker.StoreCallInfo) (context.Context, func(kvbreaker.StoreCallDoneInfo)) {
						calls.Add(1)
						return ctx, nil
					},
				}
				br, err := kvbreaker.New(st, kvbreaker.Settings{Mirror: true, FailureThreshold: 1, Observer: obs, Logger: quiet, SkipClockCheck: true})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { br.Close(context.Background()) })
				select {
				case <-healthy:
				case <-time.After(20 * time.Second):
					b.Fatal("the mirror did not become healthy within 20 s")
				}
				want := kvbreaker.Send
				if state == "open" {
					want = kvbreaker.Hold
					opener, err := kvbreaker.New(other, kvbreaker.Settings{FailureThreshold: 1, Logger: quiet, SkipClockCheck: true})
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { opener.Close(context.Background()) })
					if err := opener.Failure(ctx, host); err != nil {
						b.Fatal(err)
					}
					// Ask until the opening has reached the mirror (a
					// Put decided from it, or a Stale resolved by one
					// read).
					tick := time.NewTicker(time.Millisecond)
					deadline := time.NewTimer(20 * time.Second)
					for v, err := br.Allow(ctx, host, time.Time{}); err != nil || v.Decision != kvbreaker.Hold; v, err = br.Allow(ctx, host, time.Time{}) {
						if err != nil {
							b.Fatal(err)
						}
						select {
						case <-tick.C:
						case <-deadline.C:
							b.Fatal("another worker's opening did not reach the mirror within 20 s")
						}
					}
					tick.Stop()
					deadline.Stop()
				}
				if v, err := br.Allow(ctx, host, time.Time{}); err != nil || v.Decision != want {
					b.Fatalf("Allow = %v, %v; want %v", v.Decision, err, want)
				}
				before := calls.Load()
				b.ReportAllocs()
				for b.Loop() {
					if v, _ := br.Allow(ctx, host, time.Time{}); v.Decision != want {
						b.Fatal(v.Decision)
					}
				}
				if n := calls.Load() - before; n > 0 {
					b.Fatalf("%d store calls during the loop: the mirror stopped deciding", n)
				}
			})
		}
	}
}
