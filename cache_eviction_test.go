package kvbreaker

import (
	"fmt"
	"testing"
	"time"
)

// TestCacheEvictionOrder: in a full set whose slots were not used since
// the hand passed, CLOCK evicts slot after slot in order; a slot used
// since is spared once (its bit cleared) and the hand moves to the next.
// A hand stepping by 2 would evict every other slot and keep stale hosts
// twice as long.
func TestCacheEvictionOrder(t *testing.T) {
	c := newCache(cacheWays, time.Hour) // one shard, one set
	now := time.Now()
	put := func(h string) {
		r := c.ref(h)
		c.put(r, h, current{ver: 1}, r.begin(), now)
	}
	slots := func() []string {
		set := (*c.shards[0].sets.Load())[0].Load()
		var hs []string
		for i := range c.ways {
			hs = append(hs, set.slot[i].host)
		}
		return hs
	}
	for i := range cacheWays {
		put(fmt.Sprint("a", i))
	}
	// a0 is used: the hand spares it and evicts a1, then a2, ...
	if r := c.ref("a0"); !func() bool { _, ok := c.get(r, "a0", now, now); return ok }() {
		t.Fatal("a0 not cached")
	}
	for i := 1; i < cacheWays; i++ {
		put(fmt.Sprint("b", i))
		got := slots()
		for j, h := range got {
			want := fmt.Sprint("a", j)
			if j >= 1 && j <= i {
				want = fmt.Sprint("b", j)
			}
			if h != want {
				t.Fatalf("after inserting b1..b%d: slots %q; want slot %d to hold %s (CLOCK order, a0 spared)", i, got, j, want)
			}
		}
	}
	// The hand has come round to a0, whose bit it cleared: now it goes.
	put("c0")
	if got := slots(); got[0] != "c0" {
		t.Fatalf("slots %q: a0, spared once, should have been evicted next", got)
	}
}
