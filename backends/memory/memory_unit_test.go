package memory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestExactExpiry(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1e9, 0)}
	s := New(WithClock(clk.Now))
	ctx := context.Background()
	v, err := s.CompareAndSwap(ctx, "h", driver.NoVersion, []byte("x"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Second - time.Nanosecond)
	if _, got, err := s.Get(ctx, "h"); err != nil || got != v {
		t.Fatalf("alive 1ns before its TTL: %v %v", got, err)
	}
	clk.Add(time.Nanosecond)
	if _, _, err := s.Get(ctx, "h"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("at its TTL: %v", err)
	}
	// The expired key counts as absent for create-only...
	v2, err := s.CompareAndSwap(ctx, "h", driver.NoVersion, []byte("y"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// ...and its old version is never handed out again.
	if v2 == v {
		t.Fatal("version reused")
	}
	if _, err := s.CompareAndSwap(ctx, "h", v, []byte("z"), time.Second); !errors.Is(err, driver.ErrConflict) {
		t.Fatalf("stale version accepted: %v", err)
	}
}

// TestReclaimsDeadHosts: a million hosts written once and never again do
// not stay in memory.
func TestReclaimsDeadHosts(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1e9, 0)}
	s := New(WithClock(clk.Now))
	ctx := context.Background()
	peak := 0
	for i := range 1_000_000 {
		if _, err := s.CompareAndSwap(ctx, fmt.Sprint("host-", i), driver.NoVersion, []byte{1}, time.Second); err != nil {
			t.Fatal(err)
		}
		clk.Add(time.Millisecond) // ~1,000 live at any time
		if i%64 == 0 {
			// Len locks all 64 shards: sampled, it undercounts the peak
			// by at most 63, which the bound below allows for.
			peak = max(peak, s.Len())
		}
	}
	if peak > 4000-63 {
		t.Fatalf("peak %d entries for ~1,000 live ones", peak)
	}
}

func TestConcurrentCAS(t *testing.T) {
	s := New()
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 32 {
		wg.Go(func() {
			for range 100 {
				for {
					b, v, err := s.Get(ctx, "k")
					n := 0
					if err == nil {
						n = int(b[0]) | int(b[1])<<8
					}
					n++
					_, err = s.CompareAndSwap(ctx, "k", v, []byte{byte(n), byte(n >> 8)}, time.Minute)
					if err == nil {
						mu.Lock()
						wins++
						mu.Unlock()
						break
					}
					if !errors.Is(err, driver.ErrConflict) {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	b, _, _ := s.Get(ctx, "k")
	if n := int(b[0]) | int(b[1])<<8; n != 3200 || wins != 3200 {
		t.Fatalf("counter %d after %d successful increments: lost updates", n, wins)
	}
}

// TestAbsentGetReadsNoClock: a Get of an absent key, what every Allow on a
// healthy host asks, does not read the clock (there is no entry whose
// expiry to judge), since a clock read is a large share of that Allow's
// cost. The present key is the negative control.
func TestAbsentGetReadsNoClock(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1e9, 0)}
	reads := 0
	s := New(WithClock(func() time.Time { reads++; return clk.Now() }))
	ctx := context.Background()
	before := reads
	if _, _, err := s.Get(ctx, "absent"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatal(err)
	}
	if reads != before {
		t.Fatalf("Get of an absent key read the clock %d times", reads-before)
	}
	if _, err := s.CompareAndSwap(ctx, "present", driver.NoVersion, []byte{1}, time.Minute); err != nil {
		t.Fatal(err)
	}
	before = reads
	if _, _, err := s.Get(ctx, "present"); err != nil {
		t.Fatal(err)
	}
	if reads == before {
		t.Fatal("negative control: Get of a live key judged its expiry without reading the clock")
	}
}

// TestInjectedClockJumps: a simulation's clock may start at the zero time
// and jump to today, further than an int64 of nanoseconds spans: expiry
// counted in nanoseconds since the clock's first reading would saturate, and
// every entry written after the jump would read as expired at once.
func TestInjectedClockJumps(t *testing.T) {
	ctx := context.Background()
	c := &fakeClock{}
	s := New(WithClock(c.Now))
	// Two jumps of the longest Duration: past year 580.
	c.Add(math.MaxInt64)
	c.Add(math.MaxInt64)
	if _, err := s.CompareAndSwap(ctx, "k", driver.NoVersion, []byte("v"), time.Minute); err != nil {
		t.Fatal(err)
	}
	c.Add(time.Minute - time.Nanosecond)
	if _, _, err := s.Get(ctx, "k"); err != nil {
		t.Fatalf("1ns before its TTL: %v", err)
	}
	c.Add(time.Nanosecond)
	if _, _, err := s.Get(ctx, "k"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("at its TTL: %v, want ErrNotFound", err)
	}
}
