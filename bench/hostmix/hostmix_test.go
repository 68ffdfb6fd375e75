package hostmix

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
)

var errDown = errors.New("503")

// hostNames returns n distinct host names, built once per n.
var hostNames = sync.OnceValue(func() func(int) []string {
	var mu sync.Mutex
	made := map[int][]string{}
	return func(n int) []string {
		mu.Lock()
		defer mu.Unlock()
		if h, ok := made[n]; ok {
			return h
		}
		h := make([]string, n)
		for i := range h {
			h[i] = fmt.Sprintf("mx%06d.inbox.example", i)
		}
		made[n] = h
		return h
	}
})

// breakers is what a benchmark asks: one decision for one host, the i-th
// of the mix. ok reports whether the answer was the one the host's state
// calls for.
type breakers interface {
	ask(ctx context.Context, i int, host string) (ok bool)
}

// kv is one worker's kvbreaker over an in-process memory store, both on the
// real clock.
type kv struct {
	b    *kvbreaker.Breaker
	want kvbreaker.Decision
}

func (k *kv) ask(ctx context.Context, _ int, host string) bool {
	v, _ := k.b.Allow(ctx, host, time.Time{})
	return v.Decision == k.want
}

func newKV(tb testing.TB, hosts []string, open, cached, mirror bool) breakers {
	s := kvbreaker.Settings{FailureThreshold: 1, Mirror: mirror}
	synced := make(chan struct{}, 1)
	if mirror {
		s.Observer = &kvbreaker.Observer{Mirror: func(_ context.Context, i kvbreaker.MirrorInfo) {
			if i.Healthy {
				select {
				case synced <- struct{}{}:
				default:
				}
			}
		}}
	}
	if cached {
		// Room for every host, with headroom: the cache spreads hosts over
		// shards and sets by a hash, so at exactly len(hosts) some sets
		// overflow, and cycling through them in order never hits.
		// CacheStaleness is the default 1 s.
		s.CacheSize = 2 * len(hosts)
	}
	b, err := kvbreaker.New(memory.New(), s)
	if err != nil {
		tb.Fatal(err)
	}
	if mirror {
		<-synced
	}
	k := &kv{b: b, want: kvbreaker.Send}
	if open {
		k.want = kvbreaker.Hold
		for _, h := range hosts {
			if err := b.Failure(context.Background(), h); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return k
}

// newGobreaker makes one two-step breaker per host (a user creates them as
// hosts appear; here all exist before timing), opened by one failure.
func newGobreaker(host string, open bool) *gobreaker.TwoStepCircuitBreaker[struct{}] {
	cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name: host, Timeout: time.Hour,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	})
	if open {
		done, _ := cb.Allow()
		done(errDown)
	}
	return cb
}

// askTwoStep is gobreaker's decision as a delivery loop makes it: Allow,
// and on a closed host report the outcome (success) through done, as the
// two-step breaker requires.
func askTwoStep(cb *gobreaker.TwoStepCircuitBreaker[struct{}], open bool) bool {
	done, err := cb.Allow()
	if err != nil {
		return open && errors.Is(err, gobreaker.ErrOpenState)
	}
	done(nil)
	return !open
}

// syncMapGB holds the breakers in a sync.Map.
type syncMapGB struct {
	m    sync.Map
	open bool
}

func (g *syncMapGB) ask(_ context.Context, _ int, host string) bool {
	v, ok := g.m.Load(host)
	if !ok {
		v, _ = g.m.LoadOrStore(host, newGobreaker(host, g.open))
	}
	return askTwoStep(v.(*gobreaker.TwoStepCircuitBreaker[struct{}]), g.open)
}

// shardedGB holds the breakers in 64 maps, each under its own RWMutex.
type shardedGB struct {
	seed   maphash.Seed
	shards [64]struct {
		mu sync.RWMutex
		m  map[string]*gobreaker.TwoStepCircuitBreaker[struct{}]
		_  [40]byte // a shard per cache line
	}
	open bool
}

func (g *shardedGB) ask(_ context.Context, _ int, host string) bool {
	sh := &g.shards[maphash.String(g.seed, host)%uint64(len(g.shards))]
	sh.mu.RLock()
	cb, ok := sh.m[host]
	sh.mu.RUnlock()
	if !ok {
		sh.mu.Lock()
		if cb, ok = sh.m[host]; !ok {
			cb = newGobreaker(host, g.open)
			sh.m[host] = cb
		}
		sh.mu.Unlock()
	}
	return askTwoStep(cb, g.open)
}

func newSyncMap(hosts []string, open bool) breakers {
	g := &syncMapGB{open: open}
	for _, h := range hosts {
		g.m.Store(h, newGobreaker(h, open))
	}
	return g
}

func newSharded(hosts []string, open bool) breakers {
	g := &shardedGB{seed: maphash.MakeSeed(), open: open}
	for i := range g.shards {
		g.shards[i].m = map[string]*gobreaker.TwoStepCircuitBreaker[struct{}]{}
	}
	for _, h := range hosts {
		g.ask(context.Background(), 0, h)
	}
	return g
}

// sliceGB holds the breakers in a slice, asked by the host's index: no
// lookup at all, the limit of any per-host breaker.
type sliceGB struct {
	cbs  []*gobreaker.TwoStepCircuitBreaker[struct{}]
	open bool
}

func (g *sliceGB) ask(_ context.Context, i int, _ string) bool { return askTwoStep(g.cbs[i], g.open) }

func newSlice(hosts []string, open bool) breakers {
	g := &sliceGB{open: open}
	for _, h := range hosts {
		g.cbs = append(g.cbs, newGobreaker(h, open))
	}
	return g
}

var impls = []struct {
	name string
	make func(tb testing.TB, hosts []string, open bool) breakers
}{
	{"kvbreaker", func(tb testing.TB, h []string, open bool) breakers { return newKV(tb, h, open, false, false) }},
	{"kvbreaker-cached", func(tb testing.TB, h []string, open bool) breakers { return newKV(tb, h, open, true, false) }},
	{"kvbreaker-mirror", func(tb testing.TB, h []string, open bool) breakers { return newKV(tb, h, open, false, true) }},
	{"gobreaker-syncmap", func(_ testing.TB, h []string, open bool) breakers { return newSyncMap(h, open) }},
	{"gobreaker-sharded", func(_ testing.TB, h []string, open bool) breakers { return newSharded(h, open) }},
	{"gobreaker-slice", func(_ testing.TB, h []string, open bool) breakers { return newSlice(h, open) }},
}

// fixtures keeps each set of breakers across the calls RunParallel makes
// to calibrate b.N, so setup (100,000 failures) is paid once per process
// and per -cpu value not at all.
var fixtures sync.Map

func fixture(key string, hosts []string, mk func() breakers) breakers {
	if f, ok := fixtures.Load(key); ok {
		return f.(breakers)
	}
	br := mk()
	// One pass over the hosts before timing: steady state, caches filled
	// and every shard's slots allocated, as in a process that has run.
	for i, h := range hosts {
		br.ask(context.Background(), i, h)
	}
	f, _ := fixtures.LoadOrStore(key, br)
	return f.(breakers)
}

// BenchmarkHostMix: one decision per iteration, the hosts cycled through in
// order (each goroutine from its own starting point), so a cache smaller
// than the mix never hits. mode=serial is one goroutine (b.Loop; -cpu
// only changes what the runtime has beside it), mode=parallel is
// b.RunParallel: GOMAXPROCS goroutines.
func BenchmarkHostMix(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{10_000, 100_000} {
		hosts := hostNames()(n)
		for _, state := range []string{"closed", "open"} {
			open := state == "open"
			for _, mode := range []string{"serial", "parallel"} {
				for _, im := range impls {
					name := fmt.Sprintf("n=%d/state=%s/mode=%s/impl=%s", n, state, mode, im.name)
					b.Run(name, func(b *testing.B) {
						key := fmt.Sprintf("%s/%d/%s", im.name, n, state)
						br := fixture(key, hosts, func() breakers { return im.make(b, hosts, open) })
						if mode == "serial" {
							b.ReportAllocs()
							// The loop's thread, kept for it, so its CPU clock
							// counts the loop's work and no one else's.
							runtime.LockOSThread()
							defer runtime.UnlockOSThread()
							c0, ok := threadCPU()
							i := 0
							for b.Loop() {
								if !br.ask(ctx, i, hosts[i]) {
									b.Fatalf("%s: wrong decision on %s", state, hosts[i])
								}
								if i++; i == n {
									i = 0
								}
							}
							if c1, ok1 := threadCPU(); ok && ok1 {
								b.ReportMetric(float64(c1-c0)/float64(b.N), "cpu-ns/op")
							}
							return
						}
						var start atomic.Int64
						b.ReportAllocs()
						b.ResetTimer()
						b.RunParallel(func(pb *testing.PB) {
							i := int(start.Add(7919)) % n
							for pb.Next() {
								if !br.ask(ctx, i, hosts[i]) {
									b.Errorf("%s: wrong decision on %s", state, hosts[i])
									return
								}
								if i++; i == n {
									i = 0
								}
							}
						})
					})
				}
			}
		}
	}
}
