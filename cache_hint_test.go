package kvbreaker

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

// The tests in this file kill mutants of cache.go (go run ./tools/mutants
// -pkg . -files cache.go) that the other tests let live. They
// drive the cache directly: one shard with one set of cacheWays slots
// (newCache(cacheWays, ...)) makes CLOCK's choices visible.

// setHosts returns the hosts in the slots of a one-set cache.
func setHosts(c *cache) []string {
	sets := c.shards[0].sets.Load()
	if sets == nil || (*sets)[0].Load() == nil {
		return nil
	}
	var hs []string
	for i := range c.ways {
		hs = append(hs, (*sets)[0].Load().slot[i].host)
	}
	return hs
}

// putVer caches host's record at version v, as a read or write that
// ended now would.
func putVer(c *cache, host string, v driver.Version) {
	r := c.ref(host)
	c.put(r, host, current{ver: v}, r.begin(), time.Now())
}

func hintOf(t *testing.T, c *cache, host string) (driver.Version, bool) {
	t.Helper()
	cur, ok := c.hint(c.ref(host), host)
	return cur.ver, ok
}

// TestCacheHintFollowsUpdates: a hint follows what the worker learns of the
// record: a new version of a used slot, a second answer of the same
// sequence, the version read back after a write whose outcome was unknown
// (the tag of the withdrawn knowledge must not match it), and the record's
// deletion. One slot per host throughout.
func TestCacheHintFollowsUpdates(t *testing.T) {
	c := newCache(cacheWays, 0) // hints only, one set
	const h = "x.example"
	r := c.ref(h)
	want := func(step string, v driver.Version) {
		t.Helper()
		if got, ok := hintOf(t, c, h); !ok || got != v {
			t.Fatalf("%s: hint %d, %v; want %d, true", step, got, ok, v)
		}
	}
	putVer(c, h, 1)
	want("first put", 1) // hint marks the slot used
	putVer(c, h, 2)
	want("a new version of a used slot", 2)
	s := r.begin()
	c.put(r, h, current{ver: 3}, s, time.Now())
	c.put(r, h, current{ver: 4}, s, time.Now())
	want("two answers of one sequence: the later", 4)
	c.forget(r, h)
	if _, ok := hintOf(t, c, h); ok {
		t.Fatal("a withdrawn hint is still given")
	}
	c.put(r, h, current{ver: 4}, r.reading(), time.Now()) // the write did not happen: a read finds 4
	want("the version read back after a withdrawn write", 4)
	c.put(r, h, current{}, r.reading()+1, time.Now())
	want("the record deleted", driver.NoVersion)
	for range 2 {
		if n := c.len(); n != 1 {
			t.Fatalf("one host holds %d slots", n)
		}
	}
}

// TestCacheHintAfterWithdrawnWrite: a hint withdrawn (a write of unknown
// outcome) and read back at the version it had is a hint again: the
// withdrawn slot's tag is no longer the version's.
func TestCacheHintAfterWithdrawnWrite(t *testing.T) {
	c := newCache(cacheWays, 0)
	const h = "y.example"
	r := c.ref(h)
	putVer(c, h, 4)
	hintOf(t, c, h) // used
	c.forget(r, h)
	c.put(r, h, current{ver: 4}, r.reading(), time.Now())
	if v, ok := hintOf(t, c, h); !ok || v != 4 {
		t.Fatalf("hint %d, %v; want 4, true", v, ok)
	}
}

// TestCacheHintNeverGoesBackAfterWithdrawal: once a read found the record
// absent after a withdrawal, a read that started earlier (before another
// write in the shard ended) and lands later does not bring back the
// version it saw.
func TestCacheHintNeverGoesBackAfterWithdrawal(t *testing.T) {
	c := newCache(cacheWays, 0)
	const h = "z.example"
	r := c.ref(h)
	putVer(c, h, 5)
	c.forget(r, h) // marks the slot used
	slow := r.reading()
	r.begin()                                       // a write in the shard ends
	c.put(r, h, current{}, r.reading(), time.Now()) // a later read: absent
	c.put(r, h, current{ver: 3}, slow, time.Now())  // the earlier read lands
	if v, ok := hintOf(t, c, h); !ok || v != driver.NoVersion {
		t.Fatalf("hint %d, %v; want the record absent (%d, true)", v, ok, driver.NoVersion)
	}
}

// TestCacheHintAbsentTakesNoSlot: without the decision cache, an absent
// record is not worth a slot.
func TestCacheHintAbsentTakesNoSlot(t *testing.T) {
	c := newCache(cacheWays, 0)
	putVer(c, "a.example", 1)
	putVer(c, "b.example", driver.NoVersion)
	if n := c.len(); n != 1 {
		t.Fatalf("%d slots taken after a hint and an absent record; want 1", n)
	}
}

// TestCacheHintAbsentAllocatesNothing: an absent record (most hosts'
// state) allocates no shard's slots, and a hints-only cache allocates no
// decision words.
func TestCacheHintAbsentAllocatesNothing(t *testing.T) {
	c := newCache(0, 0)
	putVer(c, "closed.example", driver.NoVersion)
	for i := range c.shards {
		if c.shards[i].sets.Load() != nil {
			t.Fatalf("shard %d allocated for an absent record", i)
		}
	}
	r := c.ref("open.example")
	c.put(r, "open.example", current{ver: 1}, r.begin(), time.Now())
	if set := r.setOf(); set == nil || set.dec != nil {
		t.Fatal("a hints-only cache allocated decision words (or no slots)")
	}
}

// TestCacheHintPerHost: two hosts at the same version, one slot each; the
// used slot of one says nothing of the other.
func TestCacheHintPerHost(t *testing.T) {
	c := newCache(cacheWays, 0)
	putVer(c, "a.example", 1)
	hintOf(t, c, "a.example") // used
	putVer(c, "b.example", 1)
	if v, ok := hintOf(t, c, "b.example"); !ok || v != 1 {
		t.Fatalf("b's hint %d, %v; want 1, true", v, ok)
	}
}

// TestCacheHintReusedSlotTag: a slot that took another host's place takes
// its own tag: the evicted host's version is no "unchanged hint" of the
// new one.
func TestCacheHintReusedSlotTag(t *testing.T) {
	c := newCache(1, 0) // one slot
	putVer(c, "x.example", 4)
	putVer(c, "x.example", 5)
	putVer(c, "y.example", 3) // evicts x
	hintOf(t, c, "y.example") // used
	putVer(c, "y.example", 5)
	if v, ok := hintOf(t, c, "y.example"); !ok || v != 5 {
		t.Fatalf("y's hint %d, %v after its version 5 was cached; want 5, true", v, ok)
	}
}

// TestCacheClockSparesTouched: in a full set, the first eviction spares a
// host touched since it was inserted (its hint read, its version confirmed
// or changed, or read while the set was still filling), and evicts the next
// slot instead. Untouched, it is the one evicted.
func TestCacheClockSparesTouched(t *testing.T) {
	for _, tc := range []struct {
		name  string
		touch func(c *cache)
		early bool // touched before the set was full
	}{
		{"untouched", nil, false},
		{"hint read", func(c *cache) { hintOf(t, c, "a0") }, false},
		{"version confirmed", func(c *cache) { putVer(c, "a0", 1) }, false},
		{"version changed", func(c *cache) { putVer(c, "a0", 2) }, false},
		{"read while filling", func(c *cache) { hintOf(t, c, "a0") }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCache(cacheWays, 0)
			putVer(c, "a0", 1)
			if tc.early {
				tc.touch(c)
			}
			for i := 1; i < cacheWays; i++ {
				putVer(c, fmt.Sprint("a", i), 1)
			}
			if tc.touch != nil && !tc.early {
				tc.touch(c)
			}
			putVer(c, "b", 1)
			want := []string{"a0", "b", "a2", "a3", "a4", "a5", "a6", "a7"}
			if tc.touch == nil {
				want[0], want[1] = "b", "a1"
			}
			if got := setHosts(c); !slices.Equal(got, want) {
				t.Fatalf("slots %q; want %q", got, want)
			}
		})
	}
}

// TestCacheFloorAdmitsLaterReads: a read that started once the evicted
// entry's write had ended (its sequence equals the shard's floor) is newer
// than what was evicted, and is cached.
func TestCacheFloorAdmitsLaterReads(t *testing.T) {
	c := newCache(1, time.Hour) // one slot
	now := time.Now()
	a, b := "a.example", "b.example"
	ra, rb := c.ref(a), c.ref(b)
	c.put(ra, a, current{ver: 1}, ra.begin(), now)
	c.put(rb, b, current{ver: 1}, rb.reading(), now) // evicts a: the floor is a's sequence
	c.put(ra, a, current{ver: 2}, ra.reading(), now) // a read of a that started after a's write
	if cur, ok := c.get(ra, a, now, now); !ok || cur.ver != 2 {
		t.Fatalf("get(a) = version %d, %v; want 2, true", cur.ver, ok)
	}
}

// TestCacheDecisionBounds: the decision cache serves an entry until
// exactly CacheStaleness after it was read and before exactly its
// restraint's end, with the restraint and probe flag it was read with; a
// withdrawn entry never; a re-read of an unchanged version serves for
// another CacheStaleness.
func TestCacheDecisionBounds(t *testing.T) {
	const stale = time.Second
	c := newCache(100, stale)
	m := c.base.Add(time.Minute)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	get := func(h string, now, mono time.Time) (current, bool) { return c.get(c.ref(h), h, now, mono) }
	put := func(h string, cur current, mono time.Time) {
		r := c.ref(h)
		c.put(r, h, cur, r.begin(), mono)
	}

	put("closed.example", current{ver: 1}, m)
	if _, ok := get("closed.example", now, m.Add(stale-1)); !ok {
		t.Fatal("not served just before CacheStaleness")
	}
	if _, ok := get("closed.example", now, m.Add(stale)); ok {
		t.Fatal("served at CacheStaleness")
	}

	// An entry read so early that it decides until the cache's very origin.
	put("early.example", current{ver: 1}, c.base.Add(-stale))
	if _, ok := get("early.example", now, c.base.Add(-stale)); !ok {
		t.Fatal("an entry deciding until the cache's origin is not served before it")
	}

	c.forget(c.ref("gone.example"), "gone.example")
	for _, mono := range []time.Time{c.base.Add(-time.Hour), m} {
		if _, ok := get("gone.example", now, mono); ok {
			t.Fatalf("a withdrawn entry served at %v", mono.Sub(c.base))
		}
	}

	until := now.Add(time.Minute)
	for _, probing := range []bool{false, true} {
		h := fmt.Sprint("open-", probing, ".example")
		put(h, current{ver: 1, rec: record.Record{RestrainedUntil: until, Probing: probing}}, m)
		cur, ok := get(h, until.Add(-time.Millisecond), m)
		if !ok || !cur.rec.RestrainedUntil.Equal(until) || cur.rec.Probing != probing {
			t.Fatalf("probing %v: got %+v, %v; want the restraint and probe flag as put", probing, cur.rec, ok)
		}
		if _, ok := get(h, until, m); ok {
			t.Fatalf("probing %v: served at the restraint's end", probing)
		}
	}

	put("reread.example", current{ver: 1}, m)
	get("reread.example", now, m) // used
	put("reread.example", current{ver: 1}, m.Add(stale/2))
	if _, ok := get("reread.example", now, m.Add(stale)); !ok {
		t.Fatal("a re-read of an unchanged version did not renew the entry")
	}
}

// TestCacheHashCollision: two hosts whose 64-bit hashes collide in one set
// do not share an entry: the decision cache tells them apart by the second
// hash, and hints by the host name.
func TestCacheHashCollision(t *testing.T) {
	for _, stale := range []time.Duration{0, time.Second} {
		c := newCache(100, stale)
		now := time.Now()
		a, b := "a.example", "b.example"
		ra := c.ref(a)
		c.put(ra, a, current{ver: 1, rec: record.Record{RestrainedUntil: now.Add(time.Hour)}}, ra.begin(), now)
		rb := ra // b, hashed as a is
		if cur, ok := c.get(rb, b, now, now); ok {
			t.Fatalf("stale %v: get(b) served a's entry %+v", stale, cur)
		}
		if cur, ok := c.hint(rb, b); ok {
			t.Fatalf("stale %v: hint(b) gave a's entry %+v", stale, cur)
		}
		// b absent: not worth a slot without the decision cache, and
		// never a's.
		c.put(rb, b, current{}, rb.begin(), now)
		if cur, ok := c.get(ra, a, now, now); stale > 0 && (!ok || cur.ver != 1) {
			t.Fatalf("stale %v: a's entry after b's: %+v, %v", stale, cur, ok)
		}
		if n, want := c.len(), map[bool]int{false: 1, true: 2}[stale > 0]; n != want {
			t.Fatalf("stale %v: %d slots, want %d", stale, n, want)
		}
	}
}

// TestCacheShards: a cache takes as many shards (up to cacheShards) as
// keep minShardSlots slots each, and never more slots than its size.
func TestCacheShards(t *testing.T) {
	for _, tc := range []struct{ size, shards int }{
		{1, 1}, {100, 1}, {127, 1}, {128, 2}, {255, 2}, {256, 4}, {4095, 32}, {4096, 64}, {1 << 20, 64},
	} {
		c := newCache(tc.size, time.Second)
		if len(c.shards) != tc.shards {
			t.Errorf("size %d: %d shards, want %d", tc.size, len(c.shards), tc.shards)
		}
		if n := len(c.shards) * int(c.sets) * c.ways; n > tc.size || n < tc.size/2 {
			t.Errorf("size %d: %d slots", tc.size, n)
		}
	}
	if c := newCache(0, time.Hour); c.decides() {
		t.Error("a cache of size 0 (hints only) decides")
	}
}

// TestDecisionLoadRefusesWriteInProgress: a slot whose decision words are
// being written (an odd sequence) reads as a miss, not as what the words
// hold at that moment.
func TestDecisionLoadRefusesWriteInProgress(t *testing.T) {
	c := newCache(100, time.Second)
	var d decision
	d.store(c, 7, cached{cur: current{ver: 1}, until: c.base.Add(time.Second)})
	if _, _, _, ok := d.load(); !ok {
		t.Fatal("a stored entry does not load")
	}
	d.seq.Add(1) // a writer has begun
	if chk, cur, until, ok := d.load(); ok {
		t.Fatalf("load during a write = %d, %+v, %d, true; want a miss", chk, cur, until)
	}
}

// TestCacheAllocatesSetsAsUsed: a hints-only cache holds the sets its
// hosts with a record fall in, not its whole bound: a Breaker asked about
// a few hundred hosts with a record allocates a few hundred sets of
// 16,384 slots' 2,048, and every hint is still there. Allocating a shard's
// sets at a time would take all 2,048 here (200 hosts reach every one of
// the 64 shards), which the bound below refuses.
func TestCacheAllocatesSetsAsUsed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		size  int
		stale time.Duration
	}{{"hints", 0, 0}, {"decisions", 4096, time.Hour}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCache(tc.size, tc.stale)
			const hosts = 200
			for i := range hosts {
				putVer(c, fmt.Sprintf("h%d.example", i), driver.Version(i+1))
			}
			sets, shards := 0, 0
			for i := range c.shards {
				ss := c.shards[i].sets.Load()
				if ss == nil {
					continue
				}
				shards++
				for j := range *ss {
					if set := (*ss)[j].Load(); set != nil {
						sets++
						if (set.dec != nil) != (tc.stale > 0) {
							t.Fatalf("set %d/%d: decision words %v, want %v", i, j, set.dec != nil, tc.stale > 0)
						}
					}
				}
			}
			total := len(c.shards) * int(c.sets)
			if sets == 0 || sets > hosts || sets >= total/2 {
				t.Fatalf("%d sets allocated (in %d shards) for %d hosts, of %d; want at most one per host", sets, shards, hosts, total)
			}
			for i := range hosts {
				h := fmt.Sprintf("h%d.example", i)
				if v, ok := hintOf(t, c, h); !ok || v != driver.Version(i+1) {
					t.Fatalf("%s: hint %d, %v; want %d, true", h, v, ok, i+1)
				}
				if tc.stale > 0 {
					now := time.Now()
					if _, ok := c.get(c.ref(h), h, now, now); !ok {
						t.Fatalf("%s: not served from the decision cache", h)
					}
				}
			}
			if n := c.len(); n != hosts {
				t.Fatalf("len %d, want %d", n, hosts)
			}
		})
	}
}
