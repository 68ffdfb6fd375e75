package redis_test

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// lightSeconds is how long TestMirrorLightTraffic's mirrored run lasts:
// KVBREAKER_LIGHT_SECONDS, else 6. Its goal (no more than 0.05× the
// commands of no mirror) is asserted from 60 s on: in a shorter run the
// clock samples each follower takes once per 30 s weigh more.
func lightSeconds(t *testing.T) int {
	if v := os.Getenv("KVBREAKER_LIGHT_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("KVBREAKER_LIGHT_SECONDS=%q: want a whole number of seconds", v)
		}
		return n
	}
	return 6
}

// TestMirrorLightTraffic: eight Breakers over one prefix, each with a
// client of its own as eight processes would have, counted by Redis's
// INFO commandstats. Idle with Mirror, for 2 s: no more than 2 commands a
// second in all. Then each Breaker is asked three times a second about one
// of 1,000 healthy hosts (Allow, and Success after a Send): the commands
// per delivery with the mirror (after 2 s of the same traffic, counted for
// lightSeconds) against those of the same traffic without it (counted for
// 3 s). The mirror costs less than a quarter of no mirror in any run, and
// no more than 0.05× in a run of 60 s or more.
func TestMirrorLightTraffic(t *testing.T) {
	s := redistest.MustStart(t)
	ctl := newClient(t, s.Addr())
	prefix := "light/"
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
			b, err := kvbreaker.New(newStoreUnder(t, newClient(t, s.Addr()), prefix), kvbreaker.Settings{Mirror: mirror, Observer: obs})
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
	reset := func() {
		if err := ctl.ConfigResetStat(t.Context()).Err(); err != nil {
			t.Fatal(err)
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
					v, err := b.Allow(t.Context(), host, time.Time{})
					if err != nil {
						t.Error(err)
						return
					}
					if v.Decision == kvbreaker.Send {
						if err := b.Success(t.Context(), host); err != nil {
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

	mirrored := fleet(true)
	reset()
	const idle = 2 * time.Second
	time.Sleep(idle) // the span measured: nothing is asked meanwhile
	idleCount := total(serverCounts(t, ctl))
	if perSecond := float64(idleCount) / idle.Seconds(); perSecond > 2 {
		t.Errorf("8 idle mirrors: %d commands in %v (%.1f/s), want no more than 2 a second: %v", idleCount, idle, perSecond, serverCounts(t, ctl))
	}
	traffic(mirrored, 2*time.Second)
	reset()
	secs := lightSeconds(t)
	withN := traffic(mirrored, time.Duration(secs)*time.Second)
	with := serverCounts(t, ctl)
	closeAll(mirrored)

	plain := fleet(false)
	traffic(plain, time.Second) // its connections and clock checks made
	reset()
	withoutN := traffic(plain, 3*time.Second)
	without := serverCounts(t, ctl)
	closeAll(plain)

	if withN == 0 || withoutN == 0 {
		t.Fatalf("deliveries: %d with the mirror, %d without", withN, withoutN)
	}
	per := func(c map[string]int, n int) float64 { return float64(total(c)) * 1000 / float64(n) }
	ratio := per(with, withN) / per(without, withoutN)
	t.Logf("idle: %d commands in %v; light traffic, per 1,000 deliveries: %.1f with the mirror (%d deliveries in %d s: %v), %.1f without (%d in 3 s: %v): %.3f×",
		idleCount, idle, per(with, withN), withN, secs, with, per(without, withoutN), withoutN, without, ratio)
	if ratio >= 0.25 {
		t.Errorf("the mirror costs %.3f× the commands of no mirror, want well under 1", ratio)
	}
	if secs >= 60 && ratio > 0.05 {
		t.Errorf("over %d s the mirror costs %.3f× the commands of no mirror, want no more than 0.05×", secs, ratio)
	}
}
