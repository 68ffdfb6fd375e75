package mirrortest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
)

// Light is the light-traffic run of a store: eight Breakers, each with a
// store (and a client) of its own as eight processes would have, counted
// by the server.
type Light struct {
	// NewStore returns a new store with a client of its own, under the
	// run's prefix.
	NewStore func(t testing.TB) driver.Store
	// Reset clears the server's counts; Count reads them since, by name
	// (less the test's own reads).
	Reset func(t testing.TB)
	Count func(t testing.TB) map[string]int
	// Seconds is how long the mirrored traffic is counted.
	Seconds int
}

// LightSeconds is how long a light-traffic run's mirrored traffic is
// counted: KVBREAKER_LIGHT_SECONDS, else 6.
func LightSeconds(t testing.TB) int {
	if v := os.Getenv("KVBREAKER_LIGHT_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("KVBREAKER_LIGHT_SECONDS=%q: want a whole number of seconds", v)
		}
		return n
	}
	return 6
}

// LightReport is what the server counted in a Light run.
type LightReport struct {
	Idle      time.Duration
	IdleCount map[string]int
	// With and Without are the counts of the traffic with the mirror (for
	// Seconds) and without it (for 3 s), over WithN and WithoutN
	// deliveries.
	With, Without   map[string]int
	WithN, WithoutN int
	Seconds         int
}

// Total sums a count.
func Total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// Per1000 is c's requests per 1,000 of n deliveries.
func Per1000(c map[string]int, n int) float64 { return float64(Total(c)) * 1000 / float64(n) }

// Ratio is the mirror's requests per delivery over no mirror's.
func (r LightReport) Ratio() float64 {
	return Per1000(r.With, r.WithN) / Per1000(r.Without, r.WithoutN)
}

// IdlePerSecond is what the idle mirrored fleet cost a second.
func (r LightReport) IdlePerSecond() float64 { return float64(Total(r.IdleCount)) / r.Idle.Seconds() }

func (r LightReport) String() string {
	return fmt.Sprintf("idle: %d requests in %v; light traffic, per 1,000 deliveries: %.1f with the mirror (%d deliveries in %d s: %v), %.1f without (%d in 3 s: %v): %.3f×",
		Total(r.IdleCount), r.Idle, Per1000(r.With, r.WithN), r.WithN, r.Seconds, r.With, Per1000(r.Without, r.WithoutN), r.WithoutN, r.Without, r.Ratio())
}

// Run counts, with Mirror, 2 s of an idle fleet, then each Breaker asked
// three times a second about one of 1,000 healthy hosts (Allow, and
// Success after a Send) for Seconds after 2 s of the same traffic; then
// the same traffic without the mirror for 3 s, after 1 s of it.
func (l Light) Run(t testing.TB) LightReport {
	fleet := func(mirror bool) []*kvbreaker.Breaker {
		var healthy sync.WaitGroup
		var bs []*kvbreaker.Breaker
		for range 8 {
			var obs *kvbreaker.Observer
			if mirror {
				healthy.Add(1)
				var once sync.Once
				obs = &kvbreaker.Observer{Mirror: func(_ context.Context, e kvbreaker.MirrorInfo) {
					if e.Healthy {
						once.Do(healthy.Done)
					}
				}}
			}
			b, err := kvbreaker.New(l.NewStore(t), kvbreaker.Settings{Mirror: mirror, Observer: obs})
			if err != nil {
				t.Fatal(err)
			}
			bs = append(bs, b)
		}
		healthy.Wait()
		return bs
	}
	closeAll := func(bs []*kvbreaker.Breaker) {
		for _, b := range bs {
			if err := b.Close(context.Background()); err != nil {
				t.Error(err)
			}
		}
	}
	// traffic asks each Breaker three times a second for d, at random
	// (exponential gaps, as independent processes' deliveries come), and
	// returns the deliveries made.
	traffic := func(bs []*kvbreaker.Breaker, d time.Duration) int {
		var delivered atomic.Int64
		var wg sync.WaitGroup
		end := time.Now().Add(d)
		for i, b := range bs {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(i), 35))
				for {
					gap := time.Duration(rng.ExpFloat64() * float64(time.Second/3))
					if time.Until(end) < gap {
						return
					}
					time.Sleep(gap) // the traffic's pacing, not a wait for the breaker
					host := "h" + strconv.Itoa(rng.IntN(1000)) + ".example"
					v, err := b.Allow(context.Background(), host, time.Time{})
					if err != nil {
						t.Error(err)
						return
					}
					if v.Decision == kvbreaker.Send {
						if err := b.Success(context.Background(), host); err != nil {
							t.Error(err)
							return
						}
						delivered.Add(1)
					}
				}
			})
		}
		wg.Wait()
		return int(delivered.Load())
	}

	r := LightReport{Idle: 2 * time.Second, Seconds: l.Seconds}
	mirrored := fleet(true)
	l.Reset(t)
	time.Sleep(r.Idle) // the span measured: nothing is asked meanwhile
	r.IdleCount = l.Count(t)
	traffic(mirrored, 2*time.Second)
	l.Reset(t)
	r.WithN = traffic(mirrored, time.Duration(l.Seconds)*time.Second)
	r.With = l.Count(t)
	closeAll(mirrored)

	plain := fleet(false)
	traffic(plain, time.Second) // its connections and clock checks made
	l.Reset(t)
	r.WithoutN = traffic(plain, 3*time.Second)
	r.Without = l.Count(t)
	closeAll(plain)
	if r.WithN == 0 || r.WithoutN == 0 {
		t.Fatalf("deliveries: %d with the mirror, %d without", r.WithN, r.WithoutN)
	}
	return r
}
