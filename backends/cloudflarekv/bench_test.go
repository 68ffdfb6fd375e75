package cloudflarekv

import (
	"strconv"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// BenchmarkGet compares a read answered by the cache with one that goes to
// Miniflare over HTTP (cache off).
func BenchmarkGet(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []Option
	}{
		{"cached", nil},
		{"uncached", []Option{WithCache(0, 0)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := newStore(b, bc.opts...)
			if _, err := s.CompareAndSwap(b.Context(), "bench.example", driver.NoVersion, []byte("record"), time.Hour); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, _, err := s.Get(b.Context(), "bench.example"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCompareAndSwap measures one write round trip (a new key each
// time, so the one-write-per-second limit never applies).
func BenchmarkCompareAndSwap(b *testing.B) {
	s := newStore(b)
	i := 0
	for b.Loop() {
		i++
		if _, err := s.CompareAndSwap(b.Context(), "bench-"+strconv.Itoa(i)+".example", driver.NoVersion, []byte("record"), time.Hour); err != nil {
			b.Fatal(err)
		}
	}
}
