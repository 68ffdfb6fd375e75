package memory_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/wipetest"
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

// Wipes: the memory store has no bulk operation, so its wipe is what
// another holder of the same *Store does to reset it: every live key
// deleted, or overwritten, one call each.
func (harness) Wipes() []string { return []string{"delete every key", "overwrite every key"} }

func (harness) Wipe(ctx context.Context, s driver.Store, how string) error {
	m, ok := s.(*memory.Store)
	if !ok {
		return fmt.Errorf("wipe: %T is not a store of this harness", s)
	}
	keys, _, err := m.List(ctx, "", "", 1<<20)
	if err != nil {
		return err
	}
	for _, k := range keys {
		_, ver, err := m.Get(ctx, k)
		if errors.Is(err, driver.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		switch how {
		case "delete every key":
			err = m.CompareAndDelete(ctx, k, ver)
		case "overwrite every key":
			_, err = m.CompareAndSwap(ctx, k, ver, []byte("overwritten "+k), time.Hour)
		default:
			return fmt.Errorf("wipe: no way %q", how)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// TestFollowWipeBlind: follow-wipe's negative control: the same harness,
// its feeds blind to the deletes and the later Puts' absence, fails.
func TestFollowWipeBlind(t *testing.T) {
	wipetest.CheckBlindFails(t, blindable{harness{}})
}

// blindable restricts harness to the wipe a blind feed cannot pass: it
// passes Puts on, so an overwrite reaches it.
type blindable struct{ harness }

func (blindable) Wipes() []string { return []string{"delete every key"} }

// TestString: a memory store names itself as living in this process, the
// one place its records are.
func TestString(t *testing.T) {
	if got, want := memory.New().String(), "memory (this process)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
