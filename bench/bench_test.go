package bench

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
)

const host = "inbox.example"

var errDown = errors.New("503")

// mapStore is gobreaker's SharedDataStore in memory: the fairest store the
// distributed breaker can have.
type mapStore struct {
	mu    sync.Mutex
	data  map[string][]byte
	locks map[string]*sync.Mutex
}

func newMapStore() *mapStore {
	return &mapStore{data: map[string][]byte{}, locks: map[string]*sync.Mutex{}}
}

func (s *mapStore) lock(name string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.locks[name]
	if !ok {
		l = &sync.Mutex{}
		s.locks[name] = l
	}
	return l
}

func (s *mapStore) Lock(name string) error   { s.lock(name).Lock(); return nil }
func (s *mapStore) Unlock(name string) error { s.lock(name).Unlock(); return nil }
func (s *mapStore) GetData(name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.data[name], nil
}
func (s *mapStore) SetData(name string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data[name] = append([]byte(nil), data...)
	return nil
}

// clock is a fake clock the benchmarks advance by hand.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func newKV(b *testing.B, s kvbreaker.Settings) (*kvbreaker.Breaker, *clock) {
	c := &clock{now: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)}
	s.Clock = c.Now
	br, err := kvbreaker.New(memory.New(memory.WithClock(c.Now)), s)
	if err != nil {
		b.Fatal(err)
	}
	return br, c
}

func neverTrip(gobreaker.Counts) bool     { return false }
func tripOnFirst(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 1 }

func newDistributed(b *testing.B, st gobreaker.Settings) *gobreaker.DistributedCircuitBreaker[struct{}] {
	d, err := gobreaker.NewDistributedCircuitBreaker[struct{}](newMapStore(), st)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

func ok() (struct{}, error)   { return struct{}{}, nil }
func fail() (struct{}, error) { return struct{}{}, errDown }

// BenchmarkAllowClosed: the decision every delivery to a healthy host asks
// for. gobreaker's two-step Allow must be paired with its done callback;
// its distributed breaker runs the request inside Execute.
func BenchmarkAllowClosed(b *testing.B) {
	ctx := context.Background()
	b.Run("kvbreaker", func(b *testing.B) {
		br, _ := newKV(b, kvbreaker.Settings{})
		b.ReportAllocs()
		for b.Loop() {
			if v, _ := br.Allow(ctx, host, time.Time{}); v.Decision != kvbreaker.Send {
				b.Fatal(v.Decision)
			}
		}
	})
	b.Run("gobreaker-twostep", func(b *testing.B) {
		cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{Name: host})
		b.ReportAllocs()
		for b.Loop() {
			done, err := cb.Allow()
			if err != nil {
				b.Fatal(err)
			}
			done(nil)
		}
	})
	b.Run("gobreaker-distributed", func(b *testing.B) {
		d := newDistributed(b, gobreaker.Settings{Name: host})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := d.Execute(ok); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFailure: recording a failure on a closed host (the threshold is
// never reached: kvbreaker's clock moves 3 minutes per failure, so at most
// four stay in its 10-minute window).
func BenchmarkFailure(b *testing.B) {
	ctx := context.Background()
	b.Run("kvbreaker", func(b *testing.B) {
		br, c := newKV(b, kvbreaker.Settings{})
		b.ReportAllocs()
		for b.Loop() {
			c.now = c.now.Add(3 * time.Minute)
			if err := br.Failure(ctx, host); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gobreaker-twostep", func(b *testing.B) {
		cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{Name: host, ReadyToTrip: neverTrip})
		b.ReportAllocs()
		for b.Loop() {
			done, err := cb.Allow()
			if err != nil {
				b.Fatal(err)
			}
			done(errDown)
		}
	})
	b.Run("gobreaker-distributed", func(b *testing.B) {
		d := newDistributed(b, gobreaker.Settings{Name: host, ReadyToTrip: neverTrip})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := d.Execute(fail); !errors.Is(err, errDown) {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAllowOpen: the answer to a delivery to a dead host.
func BenchmarkAllowOpen(b *testing.B) {
	ctx := context.Background()
	b.Run("kvbreaker", func(b *testing.B) {
		br, _ := newKV(b, kvbreaker.Settings{FailureThreshold: 1})
		br.Failure(ctx, host)
		b.ReportAllocs()
		for b.Loop() {
			if v, _ := br.Allow(ctx, host, time.Time{}); v.Decision != kvbreaker.Hold {
				b.Fatal(v.Decision)
			}
		}
	})
	b.Run("kvbreaker-cached", func(b *testing.B) {
		br, _ := newKV(b, kvbreaker.Settings{FailureThreshold: 1, CacheSize: 1024, CacheStaleness: time.Minute})
		br.Failure(ctx, host)
		b.ReportAllocs()
		for b.Loop() {
			if v, _ := br.Allow(ctx, host, time.Time{}); v.Decision != kvbreaker.Hold {
				b.Fatal(v.Decision)
			}
		}
	})
	b.Run("gobreaker-twostep", func(b *testing.B) {
		cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{Name: host, ReadyToTrip: tripOnFirst, Timeout: time.Hour})
		done, _ := cb.Allow()
		done(errDown)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := cb.Allow(); !errors.Is(err, gobreaker.ErrOpenState) {
				b.Fatal(err)
			}
		}
	})
	b.Run("gobreaker-distributed", func(b *testing.B) {
		d := newDistributed(b, gobreaker.Settings{Name: host, ReadyToTrip: tripOnFirst, Timeout: time.Hour})
		d.Execute(fail)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := d.Execute(ok); !errors.Is(err, gobreaker.ErrOpenState) {
				b.Fatal(err)
			}
		}
	})
}
