package etcd_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

// BenchmarkCreate creates records with the Breaker's default TTL (30 min
// 5 s) on distinct keys, with lease pooling (the default) and without, and
// reports lease grants per 1,000 writes:
//
//	go test -run '^$' -bench BenchmarkCreate -benchtime 2000x ./backends/etcd/
func BenchmarkCreate(b *testing.B) {
	ttl := kvbreaker.Settings{}.WithDefaults().RecoveryDelay + 5*time.Second // the default StateTTL: TTLMargin 5 s
	for _, bc := range []struct {
		name string
		opts []etcd.Option
	}{
		{"pooled", nil},
		{"unpooled", []etcd.Option{etcd.WithLeaseReuse(0, 0)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := newStore(b, bc.opts...)
			value := record.EncodeRecord(record.Record{})
			i := 0
			for b.Loop() {
				if _, err := s.CompareAndSwap(b.Context(), fmt.Sprintf("h%d.example", i), driver.NoVersion, value, ttl); err != nil {
					b.Fatal(err)
				}
				i++
			}
			st := s.Stats()
			b.ReportMetric(st.GrantsPer1000Writes(), "grants/1000writes")
		})
	}
}

// BenchmarkGet is a linearizable read of a present key.
func BenchmarkGet(b *testing.B) {
	s := newStore(b)
	if _, err := s.CompareAndSwap(b.Context(), "h.example", driver.NoVersion, []byte("v"), longTTL); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, err := s.Get(b.Context(), "h.example"); err != nil {
			b.Fatal(err)
		}
	}
}
