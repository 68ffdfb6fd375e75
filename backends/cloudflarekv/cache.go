package cloudflarekv

import (
	"container/list"
	"sync"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// entry is what the store knows of one key: a read answer (present or
// absent) or its own queued or just-sent write.
type entry struct {
	present bool
	value   []byte
	ver     driver.Version
	exp     time.Time // logical expiry, by the store's clock
	// at is when this was learnt (real time); the entry is fresh for the
	// cache's freshness after it.
	at time.Time
	// pinned: a write of this store is queued or in flight. A pinned entry
	// is served whatever its age and never evicted, so callers build on
	// the store's own writes rather than on KV's older answer.
	pinned bool
}

// cache is a size-bounded LRU of entries. Pinned entries do not count
// against the bound and are never evicted (there are at most as many as
// keys with queued writes).
type cache struct {
	max int

	mu    sync.Mutex
	items map[string]*list.Element // of *item
	lru   list.List                // unpinned items, most recent first
	pins  int
}

type item struct {
	key string
	e   entry
}

func newCache(size int) *cache { return &cache{max: size, items: make(map[string]*list.Element)} }

// get returns key's entry if it is pinned, or was learnt less than maxAge
// before now.
func (c *cache) get(key string, now time.Time, maxAge time.Duration) (entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, it := c.lookupLocked(key)
	if it == nil || (!it.e.pinned && now.Sub(it.e.at) >= maxAge) {
		return entry{}, false
	}
	if !it.e.pinned {
		c.lru.MoveToFront(el)
	}
	return it.e, true
}

// lookupLocked returns key's element and item, nil if key has none.
func (c *cache) lookupLocked(key string) (*list.Element, *item) {
	el, ok := c.items[key]
	if !ok {
		return nil, nil
	}
	return el, el.Value.(*item)
}

// set stores key's entry, evicting the least recently used unpinned entries
// beyond the bound.
func (c *cache) set(key string, e entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(key, e)
}

func (c *cache) setLocked(key string, e entry) {
	if el, ok := c.items[key]; ok {
		it := el.Value.(*item)
		c.unlink(el, it)
		it.e = e
		c.link(el, it)
	} else {
		if !e.pinned && c.max <= 0 {
			return
		}
		it := &item{key: key, e: e}
		el := &list.Element{Value: it}
		c.items[key] = el
		c.link(el, it)
	}
	for c.lru.Len() > c.max {
		last := c.lru.Back()
		c.lru.Remove(last)
		delete(c.items, last.Value.(*item).key)
	}
}

// unlink takes it out of the LRU list or the pin count; link puts it back
// according to its (new) pinned state. A pinned item's element is kept in
// the map only.
func (c *cache) unlink(el *list.Element, it *item) {
	if it.e.pinned {
		c.pins--
	} else {
		c.lru.Remove(el)
	}
}

func (c *cache) link(el *list.Element, it *item) {
	if it.e.pinned {
		c.pins++
		c.items[it.key] = el
		return
	}
	c.items[it.key] = c.lru.PushFront(it)
}

// unpin marks key's entry as learnt at now and no longer pinned, if it still
// holds version ver (a newer queued write keeps it pinned).
func (c *cache) unpin(key string, ver driver.Version, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, it := c.lookupLocked(key)
	if it == nil || !it.e.pinned || it.e.ver != ver {
		return
	}
	e := it.e
	e.pinned, e.at = false, now
	c.setLocked(key, e)
}

// drop forgets key's entry unless it is pinned to a write other than ver.
func (c *cache) drop(key string, ver driver.Version) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, it := c.lookupLocked(key)
	if it == nil || (it.e.pinned && it.e.ver != ver) {
		return
	}
	c.unlink(el, it)
	delete(c.items, key)
}

// len returns the number of entries held, pinned included.
func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}
