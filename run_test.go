package kvbreaker_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
)

// bareConflict is a memory store whose first compare-and-swap lets another
// worker write first (interfere) and then fails with a conflict that
// carries no record, as a store that cannot return one does; it counts
// its reads.
type bareConflict struct {
	*memory.Store
	interfere func()
	cas       atomic.Int64
	gets      atomic.Int64
}

func (s *bareConflict) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, key)
}

func (s *bareConflict) CompareAndSwap(ctx context.Context, key string, old driver.Version, v []byte, ttl time.Duration) (driver.Version, error) {
	if s.cas.Add(1) == 1 && s.interfere != nil {
		s.interfere()
		return driver.NoVersion, fmt.Errorf("store: %w", driver.ErrConflict)
	}
	return s.Store.CompareAndSwap(ctx, key, old, v, ttl)
}

// TestConflictWithoutRecordIsRead: a Failure whose compare-and-swap loses
// to another worker's Failure, and learns nothing from the conflict, reads
// the store and counts both failures, whether the call started from the
// cache's hint or from a healthy mirror (one read loop for both). The
// negative control is the same Failure without the interference: over the
// mirror it reads nothing, so the read counted above is the conflict's.
func TestConflictWithoutRecordIsRead(t *testing.T) {
	for _, mirror := range []bool{false, true} {
		for _, interfere := range []bool{true, false} {
			t.Run(fmt.Sprintf("mirror=%v/interfere=%v", mirror, interfere), func(t *testing.T) {
				ctx := t.Context()
				st := &bareConflict{Store: memory.New()}
				other := newBreaker(t, st.Store, kvbreaker.Settings{FailureThreshold: 2, SkipClockCheck: true})
				if interfere {
					st.interfere = func() {
						if err := other.Failure(ctx, host); err != nil {
							t.Error(err)
						}
					}
				}
				synced := make(chan struct{}, 1)
				b := newBreaker(t, st, kvbreaker.Settings{FailureThreshold: 2, SkipClockCheck: true, Mirror: mirror, Observer: &kvbreaker.Observer{
					Mirror: func(_ context.Context, i kvbreaker.MirrorInfo) {
						if i.Healthy {
							select {
							case synced <- struct{}{}:
							default:
							}
						}
					}}})
				defer b.Close(context.WithoutCancel(ctx))
				if mirror {
					<-synced
				}
				before := st.gets.Load()
				if err := b.Failure(ctx, host); err != nil {
					t.Fatalf("Failure after a conflict without a record: %v", err)
				}
				reads := st.gets.Load() - before
				s, err := other.Inspect(ctx, host)
				if err != nil {
					t.Fatal(err)
				}
				want, wantState := 1, kvbreaker.StateClosed
				if interfere {
					want, wantState = 2, kvbreaker.StateOpen
				}
				if len(s.Failures) != want || s.State != wantState {
					t.Errorf("stored %d failures, %v; want %d, %v", len(s.Failures), s.State, want, wantState)
				}
				switch {
				case interfere && reads == 0:
					t.Error("the conflict told nothing, yet the Failure read nothing before it wrote again")
				case mirror && !interfere && reads != 0:
					t.Errorf("negative control: a Failure on a host the mirror knows absent read the store %d times", reads)
				}
			})
		}
	}
}
