package conformance_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
)

// foreignHarness makes memory stores, wrapped by wrap, and plants a value
// no Breaker wrote straight into the memory store under them.
type foreignHarness struct {
	wrap func(*memory.Store) driver.Store
	mu   sync.Mutex // guards raw: cases make stores while others plant
	raw  map[driver.Store]*memory.Store
}

func (h *foreignHarness) MakeStore(context.Context) (driver.Store, error) {
	m := memory.New()
	s := h.wrap(m)
	h.mu.Lock()
	h.raw[s] = m
	h.mu.Unlock()
	return s, nil
}

func (h *foreignHarness) Close() {}

func (h *foreignHarness) ForeignShapes() []string { return []string{"foreign bytes"} }

func (h *foreignHarness) PlantForeign(ctx context.Context, s driver.Store, key, _ string) error {
	h.mu.Lock()
	m, ok := h.raw[s]
	h.mu.Unlock()
	if !ok {
		return fmt.Errorf("not a store of this harness: %T", s)
	}
	var ver driver.Version
	if _, v, err := m.Get(ctx, key); err == nil {
		ver = v
	}
	_, err := m.CompareAndSwap(ctx, key, ver, foreign, time.Duration(1<<63-1))
	return err
}

var foreign = []byte("FOREIGN: not a record")

// refusingStore fails every call on a value it did not write, as the
// DynamoDB adapter did on an item of another shape.
type refusingStore struct{ *memory.Store }

func (s refusingStore) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	v, ver, err := s.Store.Get(ctx, key)
	if err == nil && bytes.HasPrefix(v, foreign) {
		return nil, 0, errors.New("malformed item")
	}
	return v, ver, err
}

// absentForeignStore reads a value it did not write as absent but cannot create
// over it, as the PostgreSQL adapter did on a row with version 0.
type absentForeignStore struct{ *memory.Store }

func (s absentForeignStore) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	v, ver, err := s.Store.Get(ctx, key)
	if err == nil && bytes.HasPrefix(v, foreign) {
		return nil, 0, fmt.Errorf("%w: %s", driver.ErrNotFound, key)
	}
	return v, ver, err
}

// immortalStore writes without expiry, keeping what it replaces forever.
type immortalStore struct{ *memory.Store }

func (s immortalStore) CompareAndSwap(ctx context.Context, key string, old driver.Version, v []byte, _ time.Duration) (driver.Version, error) {
	return s.Store.CompareAndSwap(ctx, key, old, v, time.Duration(1<<63-1))
}

func TestForeignValue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		wrap   func(*memory.Store) driver.Store
		broken bool
	}{
		{"memory", plain, false},
		{"refuses", func(m *memory.Store) driver.Store { return refusingStore{m} }, true},
		{"blind", func(m *memory.Store) driver.Store { return absentForeignStore{m} }, true},
		{"immortal", func(m *memory.Store) driver.Store { return immortalStore{m} }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := &foreignHarness{wrap: tc.wrap, raw: map[driver.Store]*memory.Store{}}
			rep, err := measure(t, h, conformance.WithSkipSlow(true))
			if tc.broken {
				wantBroken(t, rep, err, "foreign-value-replaced", "foreign-value-replaced")
				return
			}
			for _, res := range rep.Results {
				if res.Case == "foreign-value-replaced" && (len(res.Problems) > 0 || len(res.NotVerified) > 0) {
					t.Fatalf("foreign-value-replaced over memory: %v, not verified %v", res.Problems, res.NotVerified)
				}
			}
		})
	}
}
