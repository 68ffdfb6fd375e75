package skew_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/skew"
)

// sleepUntil sleeps until d has passed since start (bubble time).
func sleepUntil(start time.Time, d time.Duration) { time.Sleep(time.Until(start.Add(d))) }

func present(t *testing.T, s driver.Store, key string) bool {
	t.Helper()
	_, _, err := s.Get(t.Context(), key)
	switch {
	case err == nil:
		return true
	case errors.Is(err, driver.ErrNotFound):
		return false
	}
	t.Fatalf("Get(%q) = %v", key, err)
	return false
}

// lifetime writes key with ttl through s and returns when it vanished,
// probing every millisecond.
func lifetime(t *testing.T, s driver.Store, ttl time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := s.CompareAndSwap(t.Context(), "k", driver.NoVersion, []byte("v"), ttl); err != nil {
		t.Fatal(err)
	}
	for present(t, s, "k") {
		time.Sleep(time.Millisecond)
		if time.Since(start) > time.Hour {
			t.Fatal("never expired")
		}
	}
	return time.Since(start)
}

func TestDistortedLifetimes(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    skew.Distortion
		ttl  time.Duration
		want time.Duration
	}{
		{"exact", skew.Distortion{}, 2500 * time.Millisecond, 2500 * time.Millisecond},
		{"floor-to-granularity", skew.Distortion{Granularity: time.Second}, 2500 * time.Millisecond, 2 * time.Second},
		{"ceil-to-granularity", skew.Distortion{Granularity: time.Second, Round: skew.Ceil}, 2500 * time.Millisecond, 3 * time.Second},
		{"min-ttl", skew.Distortion{MinTTL: time.Minute}, time.Second, time.Minute},
		{"early", skew.Distortion{Early: 2 * time.Second}, 10 * time.Second, 8 * time.Second},
		{"late", skew.Distortion{Late: 500 * time.Millisecond}, 10 * time.Second, 10500 * time.Millisecond},
		{"reader-filtered-exact", skew.Distortion{Kind: driver.ExpiryReaderFiltered}, 2500 * time.Millisecond, 2500 * time.Millisecond},
		// The bubble starts on a whole second, so the instant floors
		// like the duration.
		{"reader-filtered-floor", skew.Distortion{Kind: driver.ExpiryReaderFiltered, Granularity: time.Second}, 2500 * time.Millisecond, 2 * time.Second},
		{"reader-filtered-late-is-physical-only", skew.Distortion{Kind: driver.ExpiryReaderFiltered, Late: time.Hour}, 2 * time.Second, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := skew.New(memory.New(), tc.d, nil).View(nil)
				if got := lifetime(t, s, tc.ttl); got < tc.want || got > tc.want+time.Millisecond {
					t.Errorf("lifetime = %v, want %v", got, tc.want)
				}
			})
		})
	}
}

// TestReaderClockJudges: with reader-filtered expiry the writer's clock sets
// the instant and each reader's own clock compares it; the server's clock
// does not matter.
func TestReaderClockJudges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		st := skew.New(memory.New(), skew.Distortion{Kind: driver.ExpiryReaderFiltered}, nil)
		writer := &skew.Clock{Offset: time.Second}
		fast := &skew.Clock{Offset: time.Second}
		slow := &skew.Clock{Offset: -time.Second}
		start := time.Now()
		ver, err := st.View(writer.Now).CompareAndSwap(ctx, "k", driver.NoVersion, []byte("v"), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		sleepUntil(start, 10*time.Second-time.Millisecond)
		if !present(t, st.View(fast.Now), "k") {
			t.Fatal("the fast reader lost the entry early")
		}
		sleepUntil(start, 10*time.Second)
		if present(t, st.View(fast.Now), "k") {
			t.Fatal("a reader whose clock agrees with the writer's still sees the entry at its expiry")
		}
		if !present(t, st.View(slow.Now), "k") {
			t.Fatal("a reader 2 s behind the writer must still see the entry")
		}
		sleepUntil(start, 12*time.Second)
		if present(t, st.View(slow.Now), "k") {
			t.Fatal("the slow reader still sees the entry 2 s after expiry")
		}
		// Expired but physically present: absent for every operation.
		v := st.View(fast.Now)
		_, err = v.CompareAndSwap(ctx, "k", ver, []byte("w"), time.Second)
		if ce, ok := errors.AsType[*driver.ConflictError](err); !ok || ce.Version != driver.NoVersion {
			t.Fatalf("CompareAndSwap with the expired version = %v, want a conflict reporting absence", err)
		}
		if err := v.CompareAndDelete(ctx, "k", ver); !errors.Is(err, driver.ErrNotFound) {
			t.Fatalf("CompareAndDelete of the expired entry = %v", err)
		}
		if _, err := v.CompareAndSwap(ctx, "k", driver.NoVersion, []byte("w"), time.Second); err != nil {
			t.Fatalf("create-only over the expired entry = %v", err)
		}
	})
}

func TestStaleReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		s := skew.New(memory.New(), skew.Distortion{Staleness: 5 * time.Second}, nil).View(nil)
		v1, err := s.CompareAndSwap(ctx, "k", driver.NoVersion, []byte("v1"), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		// Right after the first write, a full-lag read still sees nothing.
		if present(t, s, "k") {
			t.Fatal("a read 5 s stale sees a write made just now")
		}
		time.Sleep(10 * time.Second)
		v2, err := s.CompareAndSwap(ctx, "k", v1, []byte("v2"), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if _, ver, _ := s.Get(ctx, "k"); ver != v1 {
			t.Fatalf("Get right after the second write = version %d, want the stale %d", ver, v1)
		}
		time.Sleep(5 * time.Second)
		if _, ver, _ := s.Get(ctx, "k"); ver != v2 {
			t.Fatalf("Get 5 s after the write = version %d, want %d", ver, v2)
		}
	})
}

func TestWriteRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		s := skew.New(memory.New(), skew.Distortion{WriteInterval: time.Second}, nil).View(nil)
		v, err := s.CompareAndSwap(ctx, "k", driver.NoVersion, []byte("v"), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CompareAndSwap(ctx, "k", v, []byte("w"), time.Hour); !errors.Is(err, skew.ErrRateLimited) {
			t.Fatalf("second write within 1 s = %v, want ErrRateLimited", err)
		}
		if _, err := s.CompareAndSwap(ctx, "other", driver.NoVersion, []byte("v"), time.Hour); err != nil {
			t.Fatalf("the limit is per key: %v", err)
		}
		time.Sleep(time.Second)
		if _, err := s.CompareAndSwap(ctx, "k", v, []byte("w"), time.Hour); err != nil {
			t.Fatalf("write after 1 s = %v", err)
		}
	})
}

func TestCompares(t *testing.T) {
	ctx := context.Background()
	atomic := skew.New(memory.New(), skew.Distortion{}, nil).View(nil)
	v1, _ := atomic.CompareAndSwap(ctx, "k", driver.NoVersion, []byte("one"), time.Hour)
	_, err := atomic.CompareAndSwap(ctx, "k", v1+7, []byte("two"), time.Hour)
	if ce, ok := errors.AsType[*driver.ConflictError](err); !ok || ce.Version != v1 || string(ce.Value) != "one" {
		t.Fatalf("stale CompareAndSwap = %v, want a conflict carrying version %d %q", err, v1, "one")
	}
	if err := atomic.CompareAndDelete(ctx, "k", v1+7); !errors.Is(err, driver.ErrConflict) {
		t.Fatalf("stale CompareAndDelete = %v", err)
	}
	lww := skew.New(memory.New(), skew.Distortion{LastWriterWins: true}, nil).View(nil)
	w1, _ := lww.CompareAndSwap(ctx, "k", driver.NoVersion, []byte("one"), time.Hour)
	if _, err := lww.CompareAndSwap(ctx, "k", driver.NoVersion, []byte("two"), time.Hour); err != nil {
		t.Fatalf("last writer wins, yet: %v", err)
	}
	if err := lww.CompareAndDelete(ctx, "k", w1); err != nil {
		t.Fatalf("last writer wins, yet delete: %v", err)
	}
	if got := lww.Traits().Atomic; got {
		t.Fatal("a last-writer-wins distortion declares Atomic")
	}
}

func TestProfilesRoundTrip(t *testing.T) {
	for _, p := range skew.Profiles() {
		if got := p.Distortion(nil).Traits(); got != p.Traits {
			t.Errorf("%s: FromTraits(p.Traits).Traits() = %+v, want %+v", p.Name, got, p.Traits)
		}
	}
	// Declare overrides what the views say.
	st := skew.New(memory.New(), skew.Etcd.Distortion(nil), nil)
	st.Declare(skew.Memory.Traits)
	if got := st.View(nil).Traits(); got != skew.Memory.Traits {
		t.Fatalf("declared traits = %+v", got)
	}
}

func TestClockBoundAndUntil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &skew.Clock{Offset: 900 * time.Millisecond, Drift: 1e-3, Bound: time.Second}
		if got := time.Until(c.Now()); got != 900*time.Millisecond {
			t.Fatalf("offset at epoch = %v", got)
		}
		time.Sleep(time.Hour) // drift would add 3.6 s
		if got := time.Until(c.Now()); got != time.Second {
			t.Fatalf("offset after an hour = %v, want clamped to 1s", got)
		}
		d := &skew.Clock{Offset: -time.Second, Drift: 1e-4, Bound: time.Second}
		target := d.Now().Add(10 * time.Minute)
		time.Sleep(d.Until(target))
		if got := d.Now().Sub(target); got < 0 || got > time.Microsecond {
			t.Fatalf("after sleeping Until, the clock is %v past the target", got)
		}
	})
}
