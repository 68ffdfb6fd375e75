package kvbreaker_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/machine"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

// TestCacheServesHeldRechecks: with the cache on, re-checks of a held
// message cost no store read until the restraint ends.
func TestCacheServesHeldRechecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &countingStore{Store: memory.New()}
		opener := newBreaker(t, store, kvbreaker.Settings{FailureThreshold: 1})
		cached := newBreaker(t, store, kvbreaker.Settings{CacheSize: 100, CacheStaleness: time.Hour})
		opener.Failure(t.Context(), host)
		v := mustAllow(t, cached, time.Time{})
		before, writes := store.gets.Load(), store.writes.Load()
		for range 20 {
			time.Sleep(time.Minute)
			if v = mustAllow(t, cached, v.HeldSince); v.Decision != kvbreaker.Hold {
				t.Fatalf("%v", v.Decision)
			}
		}
		if n := store.gets.Load() - before; n != 0 {
			t.Fatalf("%d store reads for 20 held re-checks", n)
		}
		time.Sleep(time.Until(v.RetryAt))
		if v = mustAllow(t, cached, v.HeldSince); v.Decision != kvbreaker.Probe {
			t.Fatalf("restraint over, cached worker got %v, want the probe", v.Decision)
		}
		if store.writes.Load() != writes+1 {
			t.Fatal("the probe was not elected by a compare-and-swap in the store")
		}
	})
}

// stampStore records when each key was last written, by whom.
type stampStore struct {
	driver.Store
	mu   sync.Mutex
	last map[string]time.Time
}

func (s *stampStore) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	v, err := s.Store.CompareAndSwap(ctx, key, old, value, ttl)
	if err == nil {
		s.stamp(key)
	}
	return v, err
}

func (s *stampStore) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	err := s.Store.CompareAndDelete(ctx, key, old)
	if err == nil {
		s.stamp(key)
	}
	return err
}

func (s *stampStore) stamp(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last[key] = time.Now()
}

func (s *stampStore) lastWrite(key string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last[key]
}

// TestCacheDelayBounded: a cached decision differs from the store's answer
// only when another worker wrote the record within the last CacheStaleness,
// so the cache delays an opening or a closing by at most that much.
func TestCacheDelayBounded(t *testing.T) {
	const stale = 10 * time.Second
	synctest.Test(t, func(t *testing.T) {
		store := &stampStore{Store: memory.New(), last: map[string]time.Time{}}
		s := kvbreaker.Settings{FailureThreshold: 2, FailureWindow: time.Minute, RecoveryDelay: 2 * time.Minute}
		others := newBreaker(t, store, s)
		truth := newBreaker(t, store, s) // uncached, reads only
		s.CacheSize, s.CacheStaleness = 10, stale
		cached := newBreaker(t, store, s)
		cfg, err := machine.NewConfig(machine.Config{FailureThreshold: 2, FailureWindow: time.Minute, RecoveryDelay: 2 * time.Minute}, store.Traits())
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(7, 8))
		ctx := t.Context()
		differ, compared := 0, 0
		for range 20000 {
			time.Sleep(time.Duration(rng.IntN(int(3 * time.Second))))
			switch rng.IntN(6) {
			case 0:
				others.Success(ctx, host)
			case 1, 2:
				others.Failure(ctx, host)
			case 3:
				cached.Failure(ctx, host)
			}
			st, _ := truth.Inspect(ctx, host)
			rec := record.Record{Failures: st.Failures, RestrainedUntil: st.RestrainedUntil, Probing: st.Probing}
			want := kvbreaker.Decision(machine.AllowStep(rec, time.Now(), time.Time{}, &cfg).Decision)
			got, err := cached.Allow(ctx, host, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			compared++
			if got.Decision == kvbreaker.Probe {
				// The cached worker wrote; nothing to compare against.
				continue
			}
			if got.Decision != want {
				differ++
				if age := time.Since(store.lastWrite(host)); age >= stale {
					t.Fatalf("cached %v, store says %v, but the record last changed %v ago (staleness %v)", got.Decision, want, age, stale)
				}
			}
		}
		if differ == 0 {
			t.Fatalf("no cached decision ever differed in %d: the cache was not exercised", compared)
		}
		t.Logf("%d of %d cached decisions differed, each within %v of another worker's write", differ, compared, stale)
	})
}

// TestRoundTrips pins the store calls each decision costs, with the cache
// off: a closed Allow is one read, a Failure after it one write (the version
// read by Allow, or "absent", is tried first), a Success on an absent record
// one read and no write.
func TestRoundTrips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &countingStore{Store: memory.New()}
		b := newBreaker(t, store, kvbreaker.Settings{})
		other := newBreaker(t, store, kvbreaker.Settings{})
		ctx := t.Context()
		step := func(name string, f func(), gets, writes int64) {
			t.Helper()
			g, w := store.gets.Load(), store.writes.Load()
			f()
			if dg, dw := store.gets.Load()-g, store.writes.Load()-w; dg != gets || dw != writes {
				t.Errorf("%s: %d reads, %d writes; want %d, %d", name, dg, dw, gets, writes)
			}
		}
		step("allow closed", func() { mustAllow(t, b, time.Time{}) }, 1, 0)
		step("failure after allow", func() { b.Failure(ctx, host) }, 0, 1)
		step("second failure", func() { b.Failure(ctx, host) }, 0, 1)
		step("failure on a stale hint", func() { mustAllow(t, other, time.Time{}); other.Failure(ctx, host); b.Failure(ctx, host) }, 1, 1+2)
		step("success", func() { b.Success(ctx, host) }, 0, 1)
		step("success on absent", func() { b.Success(ctx, host) }, 1, 0)
		// Without a hint a write guesses "absent": on a record that
		// exists, the guess conflicts and the conflict carries the record.
		third := newBreaker(t, store, kvbreaker.Settings{})
		step("failure without a hint", func() { b.Failure(ctx, host); third.Failure(ctx, host) }, 0, 1+2)
	})
}
