package kvbreaker_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestCachedSuccessStillCloses: a Success decided on a cached "absent"
// record must still close a circuit the fleet opened meanwhile. A cached
// "no record" deciding the write would let Success write nothing, and the
// host would stay held for RecoveryDelay although it had just answered.
func TestCachedSuccessStillCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		rec := &recorder{}
		cached := newBreaker(t, store, kvbreaker.Settings{CacheSize: 100, OnStateChange: rec.on})
		fleet := newBreaker(t, store, kvbreaker.Settings{FailureThreshold: 1})
		if v := mustAllow(t, cached, time.Time{}); v.Decision != kvbreaker.Send {
			t.Fatalf("closed host: %v", v.Decision)
		}
		fleet.Failure(t.Context(), host)
		time.Sleep(100 * time.Millisecond)
		if err := cached.Success(t.Context(), host); err != nil {
			t.Fatal(err)
		}
		if st, _ := cached.Inspect(t.Context(), host); st.Found {
			t.Fatalf("host answered, but its record is still %v: %+v", st.State, st)
		}
		if n := rec.count(kvbreaker.StateOpen, kvbreaker.StateClosed); n != 1 {
			t.Fatalf("open→closed reported %d times, want 1", n)
		}
	})
}

// TestCachedOpenStillCountsFailure: a Failure decided on a cached "open"
// record must count when the store says closed: a cached open record
// deciding the write would make FailureStep ignore the failure.
func TestCachedOpenStillCountsFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		s := kvbreaker.Settings{FailureThreshold: 1, CacheSize: 100}
		cached := newBreaker(t, store, s)
		fleet := newBreaker(t, store, kvbreaker.Settings{FailureThreshold: 1})
		fleet.Failure(t.Context(), host)
		if v := mustAllow(t, cached, time.Time{}); v.Decision != kvbreaker.Hold {
			t.Fatalf("open host: %v", v.Decision)
		}
		fleet.Success(t.Context(), host)
		time.Sleep(100 * time.Millisecond)
		if err := cached.Failure(t.Context(), host); err != nil {
			t.Fatal(err)
		}
		st, _ := cached.Inspect(t.Context(), host)
		if st.State != kvbreaker.StateOpen || len(st.Failures) != 1 {
			t.Fatalf("a failure on a closed host was ignored: %v %+v", st.State, st)
		}
	})
}

// gatedStore holds a Get's answer (already read from the store) until
// released, so a test can land an old read after a newer write.
type gatedStore struct {
	driver.Store
	mu      sync.Mutex
	armed   bool
	read    chan struct{} // closed when the gated Get has read
	release chan struct{}
}

func (s *gatedStore) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.read, s.release = true, make(chan struct{}), make(chan struct{})
}

func (s *gatedStore) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	v, ver, err := s.Store.Get(ctx, key)
	s.mu.Lock()
	gated := s.armed
	s.armed = false
	s.mu.Unlock()
	if gated {
		close(s.read)
		<-s.release
	}
	return v, ver, err
}

// TestCacheNeverGoesBackwards: a read that started before this worker's own
// Failure opened the circuit must not replace the open record in the cache.
// If the late read could cache "closed", the worker that had just opened
// the circuit would answer Send.
func TestCacheNeverGoesBackwards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &gatedStore{Store: memory.New()}
		b := newBreaker(t, store, kvbreaker.Settings{FailureThreshold: 1, CacheSize: 100, CacheStaleness: time.Minute})
		store.arm()
		done := make(chan kvbreaker.Verdict)
		go func() {
			v, _ := b.Allow(context.Background(), host, time.Time{})
			done <- v
		}()
		<-store.read // the Allow has read "absent"
		if err := b.Failure(t.Context(), host); err != nil {
			t.Fatal(err)
		}
		close(store.release)
		if v := <-done; v.Decision != kvbreaker.Send {
			t.Fatalf("the Allow that read before the failure: %v", v.Decision)
		}
		if v := mustAllow(t, b, time.Time{}); v.Decision != kvbreaker.Hold {
			t.Fatalf("after its own failure opened the circuit, the worker answered %v", v.Decision)
		}
	})
}

// TestCacheStalenessIsMonotonic: a wall clock stepped back (NTP) must not
// keep a cached record alive. Staleness is judged on the monotonic clock:
// judged on the Breaker's wall clock, a one-hour step back would serve the
// cached "closed" record for an hour after the fleet opened the circuit.
func TestCacheStalenessIsMonotonic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var offset time.Duration
		wall := func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			return time.Now().Round(0).Add(offset) // a wall clock, no monotonic reading
		}
		store := memory.New()
		cached := newBreaker(t, store, kvbreaker.Settings{CacheSize: 100, CacheStaleness: time.Second, Clock: wall})
		fleet := newBreaker(t, store, kvbreaker.Settings{FailureThreshold: 1})
		if v := mustAllow(t, cached, time.Time{}); v.Decision != kvbreaker.Send {
			t.Fatal(v.Decision)
		}
		fleet.Failure(t.Context(), host)
		mu.Lock()
		offset = -time.Hour
		mu.Unlock()
		time.Sleep(2 * time.Second) // past CacheStaleness on the monotonic clock
		if v := mustAllow(t, cached, time.Time{}); v.Decision != kvbreaker.Hold {
			t.Fatalf("2 s after the fleet opened the circuit (staleness 1 s), a worker whose clock stepped back got %v", v.Decision)
		}
	})
}
