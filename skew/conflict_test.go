package skew_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/skew"
)

// interloper is an inner store in which another worker, once armed, writes
// the key between the view's read and its compare (so the compare is
// refused) and deletes its write again before the view can re-read: the
// key returns to the state the view's caller expected.
type interloper struct {
	*memory.Store
	other driver.Store // another view of the same skew.Store
	armed bool
}

func (s *interloper) CompareAndSwap(ctx context.Context, key string, old driver.Version, v []byte, ttl time.Duration) (driver.Version, error) {
	if !s.armed {
		return s.Store.CompareAndSwap(ctx, key, old, v, ttl)
	}
	s.armed = false
	theirs, err := s.other.CompareAndSwap(ctx, key, driver.NoVersion, []byte("theirs"), ttl)
	if err != nil {
		return 0, err
	}
	_, cerr := s.Store.CompareAndSwap(ctx, key, old, v, ttl)
	if err := s.other.CompareAndDelete(ctx, key, theirs); err != nil {
		return 0, err
	}
	return 0, cerr
}

func (s *interloper) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	if !s.armed {
		return s.Store.CompareAndDelete(ctx, key, old)
	}
	s.armed = false
	theirs, err := s.other.CompareAndSwap(ctx, key, old, []byte("theirs"), time.Minute)
	if err != nil {
		return err
	}
	derr := s.Store.CompareAndDelete(ctx, key, old)
	if err := s.other.CompareAndDelete(ctx, key, theirs); err != nil {
		return err
	}
	return derr
}

// TestConflictNamesAnotherState: when the inner compare is refused but the
// key is back in the expected state by the time the view re-reads it
// (created and deleted again by another worker), the view must not report
// a conflict whose current state is the one the caller asked for: such an
// answer fits no order of the calls, and the conformance suite's
// linearizability check rightly finds none. A swap expecting absence tries
// again; a delete of a key now absent answers ErrNotFound.
func TestConflictNamesAnotherState(t *testing.T) {
	for _, p := range skew.Profiles() {
		if !p.Traits.Atomic {
			continue // last writer wins: compares are no-ops
		}
		t.Run(p.Name, func(t *testing.T) {
			ctx := t.Context()
			inner := &interloper{Store: memory.New()}
			s := skew.New(inner, skew.FromTraits(p.Traits, nil), nil)
			v := s.View(nil)
			inner.other = s.View(nil)

			inner.armed = true
			ver, err := v.CompareAndSwap(ctx, "k", driver.NoVersion, []byte("mine"), time.Minute)
			if ce, ok := errors.AsType[*driver.ConflictError](err); ok && ce.Version == driver.NoVersion {
				t.Fatalf("CompareAndSwap expecting absence: conflict saying the key is absent (%v)", err)
			} else if err != nil {
				t.Fatalf("CompareAndSwap expecting absence on an absent key: %v", err)
			}
			if b, got, err := v.Get(ctx, "k"); err != nil || got != ver || string(b) != "mine" {
				t.Fatalf("Get after the swap: %q@%d, %v; want \"mine\"@%d", b, got, err, ver)
			}

			inner.armed = true
			err = v.CompareAndDelete(ctx, "k", ver)
			if ce, ok := errors.AsType[*driver.ConflictError](err); ok && ce.Version == driver.NoVersion {
				t.Fatalf("CompareAndDelete: conflict saying the key is absent (%v)", err)
			} else if !errors.Is(err, driver.ErrNotFound) {
				t.Fatalf("CompareAndDelete of a key another worker replaced and deleted: %v, want ErrNotFound", err)
			}
		})
	}
}
