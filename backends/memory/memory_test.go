package memory_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/skew"
)

// harness makes a fresh memory store per case, on real time.
type harness struct{ planter }

func (harness) MakeStore(context.Context) (driver.Store, error) { return memory.New(), nil }
func (harness) Close()                                          {}

// TestConformance runs the whole suite on real time: the expiry cases wait
// for 2 s TTLs (skipped under -short).
func TestConformance(t *testing.T) {
	conformance.Run(t, func(context.Context, *testing.T) (conformance.Harness, error) { return harness{}, nil })
}

// advancing is a harness whose stores run on real time plus an offset that
// Advance moves: a conformance.TimeAdvancer, so expiry is checked without
// waiting, with a TTL of an hour.
type advancing struct {
	planter
	mu  sync.Mutex
	off time.Duration
}

func (a *advancing) now() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return time.Now().Add(a.off)
}

func (a *advancing) MakeStore(context.Context) (driver.Store, error) {
	return memory.New(memory.WithClock(a.now)), nil
}

func (a *advancing) Close() {}

func (a *advancing) Advance(_ context.Context, d time.Duration) error {
	a.mu.Lock()
	a.off += d
	a.mu.Unlock()
	return nil
}

func TestConformanceAdvancing(t *testing.T) {
	conformance.Run(t, func(context.Context, *testing.T) (conformance.Harness, error) { return &advancing{}, nil },
		conformance.WithExpiryTTL(time.Hour))
}

// TestDefaultTraitsMatchSkewProfile: every Store declares DefaultTraits,
// from which skew builds the memory profile the margin experiments run on.
func TestDefaultTraitsMatchSkewProfile(t *testing.T) {
	if got, want := memory.New().Traits(), memory.DefaultTraits(); got != want {
		t.Fatalf("Traits() = %+v, but DefaultTraits() = %+v", got, want)
	}
	if got, want := skew.Memory.Traits, memory.DefaultTraits(); got != want {
		t.Fatalf("skew.Memory declares %+v, but DefaultTraits() = %+v", got, want)
	}
}
