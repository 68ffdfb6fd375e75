package kvbreaker

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

// TestCacheBounded: however many hosts pass through, the cache holds at
// most its size, and it does hold hosts (a cache that kept nothing would
// pass the bound).
func TestCacheBounded(t *testing.T) {
	for _, size := range []int{0, 1, 7, 10, 100, 5000, 20000} {
		c := newCache(size, time.Second)
		bound := size
		if size == 0 {
			bound = hintSize
		}
		for i := range 30_000 {
			h := fmt.Sprint("h", i)
			r := c.ref(h)
			c.put(r, h, current{ver: driver.Version(i + 1)}, r.begin(), time.Now())
		}
		n := c.len()
		if n > bound || n < bound/2 {
			t.Errorf("size %d: %d entries after 30,000 hosts, want between %d and %d", size, n, bound/2, bound)
		}
	}
}

// TestCacheSpreadsHosts: a cache the size of the hint cache uses every
// shard, so no one lock serves all hosts.
func TestCacheSpreadsHosts(t *testing.T) {
	c := newCache(0, 0)
	if len(c.shards) != cacheShards {
		t.Fatalf("%d shards for %d hints, want %d", len(c.shards), hintSize, cacheShards)
	}
	used := map[*cacheShard]bool{}
	for i := range 1000 {
		used[c.ref(fmt.Sprint("h", i)).sh] = true
	}
	if len(used) != cacheShards {
		t.Fatalf("1,000 hosts used %d of %d shards", len(used), cacheShards)
	}
}

// TestCacheKeepsUsedEntries: CLOCK eviction spares a host read since the
// hand last passed, so a host checked on every delivery stays cached while
// a stream of one-off hosts goes through its set.
func TestCacheKeepsUsedEntries(t *testing.T) {
	c := newCache(cacheWays, time.Hour) // one set
	now := time.Now()
	hot := "hot.example"
	r := c.ref(hot)
	c.put(r, hot, current{ver: 1}, r.begin(), now)
	for i := range 1000 {
		if _, ok := c.get(r, hot, now, now); !ok {
			t.Fatalf("the hot host was evicted after %d one-off hosts", i)
		}
		h := fmt.Sprint("once", i)
		ro := c.ref(h)
		c.put(ro, h, current{ver: 2}, ro.begin(), now)
	}
}

// TestCacheNeverGoesBackwardsAcrossEviction: a read that started before
// this worker's write, and lands after the write's entry was evicted, must
// not be cached: it would serve the record as it was before the write.
// Fails without the shard's floor (the old read was cached and get served
// the pre-write record).
func TestCacheNeverGoesBackwardsAcrossEviction(t *testing.T) {
	c := newCache(1, time.Hour) // one slot
	now := time.Now()
	a, b := "a.example", "b.example"
	ra, rb := c.ref(a), c.ref(b)
	readSeq := ra.begin() // a read of a starts, finds it absent...
	open := current{rec: record.Record{RestrainedUntil: now.Add(time.Hour)}, ver: 7}
	c.put(ra, a, open, ra.begin(), now)            // ...this worker's write opens a...
	c.put(rb, b, current{ver: 1}, rb.begin(), now) // ...and b evicts it
	c.put(ra, a, current{}, readSeq, now)          // the old read lands
	if cur, ok := c.get(ra, a, now, now); ok && cur.ver != open.ver {
		t.Fatalf("cache went backwards: serves version %d after this worker wrote %d", cur.ver, open.ver)
	}
	// Negative control: a read that started after the eviction is cached.
	fresh := ra.begin()
	c.put(ra, a, open, fresh, now)
	if cur, ok := c.get(ra, a, now, now); !ok || cur.ver != open.ver {
		t.Fatalf("a fresh read was not cached: %v %v", cur.ver, ok)
	}
}

// TestDecisionSeqlockConsistent: a reader of a slot's decision words never
// gets a mix of two entries, however a writer interleaves (each entry's
// restraint and probe flag follow from its version, and every load is
// checked against that). Run with -race: the words are atomics.
func TestDecisionSeqlockConsistent(t *testing.T) {
	c := newCache(100, time.Second)
	var d decision
	t0 := time.UnixMilli(1_800_000_000_000)
	entry := func(k uint64) cached {
		return cached{cur: current{ver: driver.Version(k), rec: record.Record{
			RestrainedUntil: t0.Add(time.Duration(k) * time.Millisecond), Probing: k%2 == 1}},
			until: c.base.Add(time.Duration(k+1) * time.Second)}
	}
	d.store(c, 7, entry(1))
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for k := uint64(2); !stop.Load(); k++ {
			d.store(c, 7, entry(k))
		}
	}()
	defer func() { stop.Store(true); <-done }()
	loads := 0
	for range 200_000 {
		chk, cur, until, ok := d.load()
		if !ok {
			continue
		}
		loads++
		k := uint64(cur.ver)
		want := entry(k)
		if chk != 7 || !cur.rec.RestrainedUntil.Equal(want.cur.rec.RestrainedUntil) || cur.rec.Probing != want.cur.rec.Probing ||
			until != int64(want.until.Sub(c.base)) {
			t.Fatalf("torn load: version %d with restraint %v, probing %v, until %d", k, cur.rec.RestrainedUntil, cur.rec.Probing, until)
		}
	}
	if loads == 0 {
		t.Fatal("no consistent load while the writer ran")
	}
}
