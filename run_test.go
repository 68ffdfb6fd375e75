package kvbreaker_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/record"
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
// cache's hint or from a healthy mirror (one read loop for both): one read
// after the conflict, and one more compare-and-swap, against what it read.
// The negative control is the same Failure without the interference: it
// reads nothing, so the read counted above is the conflict's.
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
				// One read, after the conflict, and the second write on
				// what it found; without a conflict, the hint (absent) or
				// the mirror (absent) spares the read.
				wantReads, wantWrites := int64(0), int64(1)
				if interfere {
					wantReads, wantWrites = 1, 2
				}
				if reads != wantReads || st.cas.Load() != wantWrites {
					t.Errorf("%d reads and %d compare-and-swaps; want %d and %d", reads, st.cas.Load(), wantReads, wantWrites)
				}
			})
		}
	}
}

// TestMirrorLearnsWhatItsReadFound: a Failure on a mirrored record past its
// restraint reads the store (the record may have expired unannounced); here
// the store holds a newer open record, so the Failure writes nothing, and
// the mirror keeps what the read found: the next Allow holds from it
// without a store request. The negative control is a second host set up
// alike without the Failure: its Allow decides on the mirror's old record,
// elects a probe and pays a compare-and-swap to learn better; the record
// that conflict returned is then in the mirror too, and the host's next
// Allow is free.
func TestMirrorLearnsWhatItsReadFound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := &counting{Store: memory.New(), script: make(chan driver.Change)}
		b := mirrored(t, st, kvbreaker.Settings{})
		now := time.Now()
		old := record.EncodeRecord(record.Record{Failures: []time.Time{now.Add(-31 * time.Minute)}, RestrainedUntil: now.Add(-time.Minute)})
		changes := []driver.Change{{Kind: driver.ChangeReset}}
		for _, h := range []string{"read.example", "control.example"} {
			ver, err := st.Store.CompareAndSwap(ctx, h, driver.NoVersion, openRecord(now), time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			changes = append(changes, driver.Change{Kind: driver.ChangePut, Key: h, Value: old, Version: ver + 100})
		}
		for _, c := range append(changes, driver.Change{Kind: driver.ChangeSynced, At: now}) {
			st.script <- c
		}
		synctest.Wait()
		if err := b.Failure(ctx, "read.example"); err != nil {
			t.Fatal(err)
		}
		if n := st.gets.Load(); n != 1 || st.writes.Load() != 0 {
			t.Fatalf("Failure past the mirror's restraint: %d reads, %d writes; want one read, no write (the store's record is open)", n, st.writes.Load())
		}
		for _, c := range []struct {
			host string
			free bool
		}{{"read.example", true}, {"control.example", false}, {"control.example", true}} {
			before := st.requests()
			v, err := b.Allow(ctx, c.host, time.Time{})
			if err != nil || v.Decision != kvbreaker.Hold {
				t.Fatalf("Allow(%s) = %v, %v; want Hold (the store's record is open)", c.host, v.Decision, err)
			}
			switch n := st.requests() - before; {
			case c.free && n != 0:
				t.Errorf("Allow(%s) made %d store requests; want none, the mirror having learnt the record the store holds", c.host, n)
			case !c.free && n == 0:
				t.Error("negative control: Allow on the mirror's old record past its restraint made no store request")
			}
		}
	})
}
