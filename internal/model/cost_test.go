package model

import (
	"context"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
)

// countingStore counts the requests a real Breaker sends.
type countingStore struct {
	driver.Store
	cost Cost
}

func (s *countingStore) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	s.cost.Reads++
	return s.Store.Get(ctx, key)
}

func (s *countingStore) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	s.cost.Writes++
	return s.Store.CompareAndSwap(ctx, key, old, value, ttl)
}

func (s *countingStore) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	s.cost.Writes++
	return s.Store.CompareAndDelete(ctx, key, old)
}

// TestDecisionCacheMirrorsCore: the simulator's decision cache (procStore,
// on simulated time) answers every call as core's own cache
// (Settings.CacheSize, on the real monotonic clock, here a synctest
// bubble's) and sends the same requests, on random call streams over a few
// hosts with gaps around the staleness. The negative control turns the
// model's cache off: its request count must then differ.
func TestDecisionCacheMirrorsCore(t *testing.T) {
	for _, tc := range []struct {
		name      string
		modelSize int
		wantSame  bool
	}{{"same-cache", 64, true}, {"control-model-cache-off", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				store := &countingStore{Store: memory.New()}
				real, err := kvbreaker.New(store, kvbreaker.Settings{CacheSize: 64, CacheStaleness: time.Second,
					FailureThreshold: 2, RecoveryDelay: 5 * time.Second, FailureWindow: 10 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				var opts []Option
				if tc.modelSize > 0 {
					opts = append(opts, WithDecisionCache(tc.modelSize, time.Second))
				}
				sim, err := NewKvbreaker(kvbreaker.Settings{FailureThreshold: 2, RecoveryDelay: 5 * time.Second, FailureWindow: 10 * time.Second}, time.Now, opts...)
				if err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(7, 7))
				hosts := []string{"a.example", "b.example", "c.example"}
				differ := 0
				for i := range 3000 {
					time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
					h := hosts[rng.IntN(len(hosts))]
					now := time.Now()
					switch op := rng.IntN(10); {
					case op < 6:
						var held time.Time
						if rng.IntN(3) == 0 {
							held = now.Add(-time.Minute)
						}
						want, err := real.Allow(ctx, h, held)
						if err != nil {
							t.Fatal(err)
						}
						got, _ := sim.Allow(h, now, held)
						if got.Decision != want.Decision || !got.RetryAt.Equal(want.RetryAt) {
							differ++
							if tc.wantSame {
								t.Fatalf("call %d Allow %s: model %v %v, core %v %v", i, h, got.Decision, got.RetryAt, want.Decision, want.RetryAt)
							}
						}
					case op < 8:
						if err := real.Failure(ctx, h); err != nil {
							t.Fatal(err)
						}
						sim.Failure(h, now)
					default:
						if err := real.Success(ctx, h); err != nil {
							t.Fatal(err)
						}
						sim.Success(h, now)
					}
				}
				if sim.Err() != nil {
					t.Fatal(sim.Err())
				}
				got, want := sim.Cost(), store.cost
				t.Logf("core: %d reads, %d writes; model: %d reads, %d writes; %d Allows from the model's cache, %d decisions differ",
					want.Reads, want.Writes, got.Reads, got.Writes, sim.Staleness().Served, differ)
				if same := got.Reads == want.Reads && got.Writes == want.Writes; same != tc.wantSame {
					t.Errorf("model requests %+v, core %+v: same = %v, want %v", got, want, same, tc.wantSame)
				}
			})
		})
	}
}

// TestFedifyCostFollowsItsCode counts fedify's requests on one call of each
// kind, as its code makes them (see Fedify).
func TestFedifyCostFollowsItsCode(t *testing.T) {
	f, err := NewFedify(FedifyOptions{FailureThreshold: 2})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		name string
		do   func()
		want Cost
	}{
		{"send on no record: one get", func() { f.Allow("h", t0, time.Time{}) }, Cost{Reads: 1}},
		{"success on no record: one get", func() { f.Success("h", t0) }, Cost{Reads: 1}},
		{"failure: get, set, the outbox's beforeSend", func() { f.Failure("h", t0) }, Cost{Reads: 2, Writes: 1}},
		{"success on a record: get, delete", func() { f.Success("h", t0) }, Cost{Reads: 1, Writes: 1}},
		{"two failures open: 4 gets, 2 sets", func() { f.Failure("h", t0); f.Failure("h", t0) }, Cost{Reads: 4, Writes: 2}},
		{"failure while open: 2 gets, no write", func() { f.Failure("h", t0) }, Cost{Reads: 2}},
		{"hold while open: one get", func() { f.Allow("h", t0.Add(time.Minute), time.Time{}) }, Cost{Reads: 1}},
		{"probe: get, set", func() { f.Allow("h", t0.Add(time.Hour), time.Time{}) }, Cost{Reads: 1, Writes: 1}},
		{"drop: nothing", func() { f.Allow("h", t0.Add(time.Hour), t0.Add(-8*24*time.Hour)) }, Cost{}},
	}
	for _, st := range steps {
		before := f.Cost()
		st.do()
		after := f.Cost()
		if got := (Cost{Reads: after.Reads - before.Reads, Writes: after.Writes - before.Writes}); got != st.want {
			t.Errorf("%s: %+v, want %+v", st.name, got, st.want)
		}
	}
}
