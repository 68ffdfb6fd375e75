package lrucmp

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

var hosts = func() []string {
	h := make([]string, 10000)
	for i := range h {
		h[i] = fmt.Sprintf("mx%06d.inbox.example", i)
	}
	return h
}()

// One Allow's cache traffic with the decision cache off: a hint stored
// after every read (4,096 hints, 10,000 hosts cycled: every put evicts).
func BenchmarkHint(b *testing.B) {
	now := time.Now()
	b.Run("impl=sharded", func(b *testing.B) {
		c := newCache(4096, 0) // hints only, 4,096 slots
		var start atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			i := int(start.Add(7919)) % len(hosts)
			for pb.Next() {
				h := hosts[i]
				r := c.ref(h)
				c.put(r, h, current{}, r.begin(), now)
				if i++; i == len(hosts) {
					i = 0
				}
			}
		})
	})
	b.Run("impl=golang-lru", func(b *testing.B) {
		c, _ := lru.New[string, cached](4096)
		var seq atomic.Uint64
		var start atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			i := int(start.Add(7919)) % len(hosts)
			for pb.Next() {
				h := hosts[i]
				s := seq.Add(1)
				// the same check-then-set the cache needs (newer wins)
				if old, ok := c.Peek(h); !ok || old.seq < s {
					c.Add(h, cached{seq: s})
				}
				if i++; i == len(hosts) {
					i = 0
				}
			}
		})
	})
}

// Decision cache on, every host fits: a hit per Allow.
var misses atomic.Int64

func BenchmarkDecide(b *testing.B) {
	defer func() { b.Logf("misses %d", misses.Load()) }()
	now := time.Now()
	b.Run("impl=sharded", func(b *testing.B) {
		c := newCache(20000, time.Hour)
		for _, h := range hosts {
			r := c.ref(h)
			c.put(r, h, current{}, r.begin(), now)
		}
		var start atomic.Int64
		misses.Store(0)
		defer func() { b.ReportMetric(float64(misses.Load())/float64(b.N), "misses/op") }()
		b.RunParallel(func(pb *testing.PB) {
			i := int(start.Add(7919)) % len(hosts)
			for pb.Next() {
				h := hosts[i]
				if _, ok := c.get(c.ref(h), h, now, now); !ok {
					misses.Add(1)
				}
				if i++; i == len(hosts) {
					i = 0
				}
			}
		})
	})
	b.Run("impl=golang-lru", func(b *testing.B) {
		c, _ := lru.New[string, cached](20000)
		for _, h := range hosts {
			c.Add(h, cached{until: now.Add(time.Hour)})
		}
		var start atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			i := int(start.Add(7919)) % len(hosts)
			for pb.Next() {
				h := hosts[i]
				if e, ok := c.Get(h); !ok || !now.Before(e.until) {
					misses.Add(1)
				}
				if i++; i == len(hosts) {
					i = 0
				}
			}
		})
	})
}
