package memory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/kvbreaker/kvbreaker/driver"
)

// fill writes n keys "<prefix>-<i>" with ttl.
func fill(t testing.TB, s *Store, prefix string, n int, ttl time.Duration) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		if _, err := s.CompareAndSwap(ctx, fmt.Sprint(prefix, "-", i), driver.NoVersion, []byte{1}, ttl); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSweepFreesWithoutTraffic: on the default clock, entries are freed
// about a second after they expire with no write or read at all, and a
// few writes afterwards leave only the live ones (freeing only on writes
// kept all 100,000).
func TestSweepFreesWithoutTraffic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		defer s.Close()
		const dead = 100_000
		fill(t, s, "dead", dead, time.Second)
		if n := s.Len(); n != dead {
			t.Fatalf("Len() = %d right after %d writes", n, dead)
		}
		time.Sleep(time.Second + time.Duration(sweepDelay) + time.Millisecond)
		synctest.Wait()
		if n := s.Len(); n != 0 {
			t.Fatalf("Len() = %d a second after all %d entries expired, with no traffic; want 0", n, dead)
		}
		fill(t, s, "live", 1000, time.Minute)
		if n := s.Len(); n != 1000 {
			t.Fatalf("Len() = %d after 1,000 writes; want the 1,000 live entries", n)
		}
	})
}

// TestSweepKeepsLive: the sweep frees exactly the expired entries, in
// order of expiry across shards, while live ones (and rewritten ones, whose
// expiry moved) stay; and it arms itself again for the next expiry.
func TestSweepKeepsLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := New()
		defer s.Close()
		fill(t, s, "a", 500, 10*time.Second)
		fill(t, s, "b", 500, 20*time.Second)
		// Rewrite a-0..a-99 to live 30 s.
		for i := range 100 {
			key := fmt.Sprint("a-", i)
			_, v, err := s.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.CompareAndSwap(ctx, key, v, []byte{2}, 30*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		for _, step := range []struct {
			at   time.Duration
			want int
		}{
			{9 * time.Second, 1000},
			{12 * time.Second, 600}, // a-100..a-499 gone
			{22 * time.Second, 100}, // b-* gone
			{32 * time.Second, 0},   // the rewritten ones gone
		} {
			time.Sleep(step.at - elapsed(s))
			synctest.Wait()
			if n := s.Len(); n != step.want {
				t.Fatalf("at %v: Len() = %d, want %d", step.at, n, step.want)
			}
		}
		if _, _, err := s.Get(ctx, "a-0"); !errors.Is(err, driver.ErrNotFound) {
			t.Fatalf("Get(a-0) after everything expired: %v", err)
		}
	})
}

// elapsed is the time since s was made (its timeline).
func elapsed(s *Store) time.Duration { n, _ := s.now(); return time.Duration(n) }

// TestClose: Close disarms the sweep (nothing is freed by time after it)
// and a later write arms it again, so Breakers sharing a store may each
// close it.
func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		fill(t, s, "x", 100, time.Second)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := s.Len(); n != 100 {
			t.Fatalf("Len() = %d an hour after Close; want 100: the sweep ran after Close", n)
		}
		fill(t, s, "y", 1, time.Second)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if n := s.Len(); n != 0 {
			t.Fatalf("Len() = %d after a write re-armed the sweep; want 0", n)
		}
		s.Close()
	})
}

// TestCloseWaitsForSweep: a Close during a sweep returns after it ended
// (the sweep stops at the next shard), on real time and many entries so
// that the two overlap; the leak check in TestMain would report a sweep
// goroutine left running.
func TestCloseWaitsForSweep(t *testing.T) {
	s := New()
	fill(t, s, "x", 50_000, time.Millisecond)
	runtime.Gosched()
	s.Close()
	s.sweep.mu.Lock()
	running, armed := s.sweep.running, s.sweep.timer != nil
	s.sweep.mu.Unlock()
	if running != 0 || armed {
		t.Fatalf("after Close: %d sweeps running, timer armed %v", running, armed)
	}
}

// TestInjectedClockWritesFree: with WithClock the store runs no sweep, but
// each write frees its shard's expired entries and another shard's in
// turn: after as many writes as there are shards, only the live entries
// are held, whichever shards the keys hash to.
func TestInjectedClockWritesFree(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1e9, 0)}
	s := New(WithClock(clk.Now))
	fill(t, s, "dead", 100_000, time.Second)
	clk.Add(time.Second)
	fill(t, s, "live", shards, time.Minute)
	if n := s.Len(); n != shards {
		t.Fatalf("Len() = %d after %d writes once 100,000 entries expired; want the %d live ones", n, shards, shards)
	}
}

// TestDeadHostsMemory: a million hosts fail once and expire, then 1,000
// further writes leave 1,000 entries; it logs the heap:
//
//	go test -run TestDeadHostsMemory -v ./backends/memory/
func TestDeadHostsMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("a million writes")
	}
	clk := &fakeClock{now: time.Unix(1e9, 0)}
	base := heap()
	s := New(WithClock(clk.Now))
	fill(t, s, "dead", 1_000_000, time.Second)
	full := heap()
	clk.Add(time.Second)
	fill(t, s, "live", 1000, time.Minute)
	after := heap()
	n := s.Len()
	t.Logf("1,000,000 expired hosts: heap +%.1f MiB; after 1,000 more writes: %d entries, heap +%.1f MiB", mib(full-base), n, mib(after-base))
	if n != 1000 {
		t.Errorf("Len() = %d, want the 1,000 live entries", n)
	}
	if after-base > 8<<20 {
		t.Errorf("heap +%.1f MiB for 1,000 live entries", mib(after-base))
	}
	runtime.KeepAlive(s)
}

// TestEntrySize: an entry stays in the 64-byte size class (the expiry heap's
// position took the place of a second expiry field).
func TestEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n > 64 {
		t.Fatalf("entry is %d bytes", n)
	}
}

func heap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// TestExpiry: driver.ExpiryReader on both clocks.
func TestExpiry(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, s *Store, advance func(time.Duration)) {
		t.Helper()
		if _, err := s.Expiry(ctx, "absent"); !errors.Is(err, driver.ErrNotFound) {
			t.Fatalf("Expiry(absent) = %v, want ErrNotFound", err)
		}
		v, err := s.CompareAndSwap(ctx, "k", driver.NoVersion, []byte{1}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		advance(20 * time.Second)
		if d, err := s.Expiry(ctx, "k"); err != nil || d != 40*time.Second {
			t.Fatalf("Expiry 20 s into a 1 min TTL = %v, %v; want 40s", d, err)
		}
		if _, err := s.CompareAndSwap(ctx, "k", v, []byte{2}, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		if d, err := s.Expiry(ctx, "k"); err != nil || d != 2*time.Minute {
			t.Fatalf("Expiry after a write with TTL 2 min = %v, %v", d, err)
		}
		advance(2 * time.Minute)
		if d, err := s.Expiry(ctx, "k"); !errors.Is(err, driver.ErrNotFound) {
			t.Fatalf("Expiry at the TTL = %v, %v; want ErrNotFound", d, err)
		}
		if _, err := s.CompareAndSwap(ctx, "forever", driver.NoVersion, []byte{1}, math.MaxInt64); err != nil {
			t.Fatal(err)
		}
		advance(time.Second)
		if d, err := s.Expiry(ctx, "forever"); err != nil || d < 200*365*24*time.Hour {
			t.Fatalf("Expiry of a key with TTL MaxInt64 = %v, %v", d, err)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.Expiry(cctx, "k"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Expiry with a canceled context = %v", err)
		}
	}
	t.Run("default clock", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := New()
			defer s.Close()
			check(t, s, time.Sleep)
			if d, _ := s.Expiry(ctx, "forever"); d != driver.NoExpiry {
				t.Fatalf("Expiry past the timeline's end = %v, want NoExpiry", d)
			}
		})
	})
	t.Run("injected clock", func(t *testing.T) {
		clk := &fakeClock{now: time.Unix(1e9, 0)}
		check(t, New(WithClock(clk.Now)), clk.Add)
	})
}
