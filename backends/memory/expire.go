package memory

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

const (
	// sweepDelay is how long after the earliest expiry the background
	// sweep runs, so that one sweep frees what expires within a second
	// of it: sweeps run at most about once a second.
	sweepDelay = int64(time.Second)
	// sweepBatch bounds the entries a sweep frees per hold of a shard's
	// lock, so writers to that shard wait for at most one batch.
	sweepBatch = 1024
)

// The expiry heap of a shard, all under sh.mu.

func before(a, b *entry) bool {
	return a.expires < b.expires || a.expires == b.expires && a.expiresNsec < b.expiresNsec
}

func (sh *shard) push(e *entry) {
	e.pos = int32(len(sh.heap))
	sh.heap = append(sh.heap, e)
	sh.up(int(e.pos))
}

// replace puts e in old's place in the heap (a write to a live key).
func (sh *shard) replace(old, e *entry) {
	e.pos = old.pos
	sh.heap[e.pos] = e
	sh.fix(int(e.pos))
}

// remove takes e out of the heap and the map, and tells the followers: a
// deletion and an expiry freed are both a ChangeDelete.
func (sh *shard) remove(s *Store, e *entry) {
	s.publish(driver.Change{Kind: driver.ChangeDelete, Key: e.key, Version: e.version})
	sh.entries.Delete(e.key)
	i, last := int(e.pos), len(sh.heap)-1
	if i != last {
		sh.swap(i, last)
	}
	sh.heap[last] = nil
	sh.heap = sh.heap[:last]
	if i != last {
		sh.fix(i)
	}
	// A shard that held many more entries than now gives the memory back.
	if c := cap(sh.heap); c > 256 && len(sh.heap) < c/4 {
		sh.heap = slices.Clone(sh.heap)
	}
}

func (sh *shard) swap(i, j int) {
	sh.heap[i], sh.heap[j] = sh.heap[j], sh.heap[i]
	sh.heap[i].pos = int32(i)
	sh.heap[j].pos = int32(j)
}

func (sh *shard) fix(i int) {
	if !sh.down(i) {
		sh.up(i)
	}
}

func (sh *shard) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !before(sh.heap[i], sh.heap[p]) {
			return
		}
		sh.swap(i, p)
		i = p
	}
}

// down reports whether the entry at i moved.
func (sh *shard) down(i int) bool {
	start, n := i, len(sh.heap)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && before(sh.heap[r], sh.heap[l]) {
			m = r
		}
		if !before(sh.heap[m], sh.heap[i]) {
			break
		}
		sh.swap(i, m)
		i = m
	}
	return i > start
}

// reclaim frees up to limit (all when negative) of the shard's expired
// entries, earliest first, and reports whether none is left. It reads the
// clock only when the shard holds an entry.
func (sh *shard) reclaim(s *Store, c *clock, limit int) bool {
	for len(sh.heap) > 0 {
		top := sh.heap[0]
		c.get(s)
		if !expired(top, c) {
			return true
		}
		if limit == 0 {
			return false
		}
		limit--
		sh.remove(s, top)
	}
	return true
}

// sweeper runs the background sweep of a store on the default clock: a
// time.AfterFunc timer armed for sweepDelay after the earliest expiry held,
// so that while it waits there is no goroutine, and a store nobody uses
// keeps no timer once its last entry is freed.
type sweeper struct {
	// at is the store's timeline instant the armed timer fires at,
	// math.MaxInt64 when none is armed: a write reads it without a lock to
	// tell whether its entry needs an earlier sweep.
	at atomic.Int64
	// stopped mirrors stops for a sweep under way, read between shards.
	stopped atomic.Uint64

	mu      sync.Mutex
	timer   *time.Timer
	gen     uint64 // bumped by every arming and Close: an older timer's sweep does nothing
	stops   uint64 // Close calls
	running int    // sweeps under way
	idle    sync.Cond
}

func (w *sweeper) init() {
	w.at.Store(math.MaxInt64)
	w.idle.L = &w.mu
}

// afterWrite runs after a write to sh stored an entry expiring at expires
// (the store's timeline), with no lock held. On an injected clock it frees
// the expired entries of the next shard in turn; on the default clock it
// arms the sweep if the entry expires before the armed one runs.
func (s *Store) afterWrite(sh *shard, expires int64) {
	if s.clock != nil {
		o := &s.shards[s.turn.Add(1)%shards]
		if o != sh {
			var c clock
			o.mu.Lock()
			o.reclaim(s, &c, -1)
			o.mu.Unlock()
		}
		return
	}
	if expires > math.MaxInt64-sweepDelay {
		return // never expires
	}
	if at := expires + sweepDelay; at < s.sweep.at.Load() {
		s.sweep.mu.Lock()
		s.arm(at)
		s.sweep.mu.Unlock()
	}
}

// arm sets the sweep timer to fire at at unless it fires earlier already.
// Called with s.sweep.mu held.
func (s *Store) arm(at int64) {
	w := &s.sweep
	if at >= w.at.Load() {
		return
	}
	if w.timer != nil {
		w.timer.Stop()
	}
	w.gen++
	gen := w.gen
	w.at.Store(at)
	now, _ := s.now()
	w.timer = time.AfterFunc(time.Duration(at-now), func() { s.sweepAll(gen) })
}

// sweepAll frees every shard's expired entries, one shard's lock (and at
// most sweepBatch entries) at a time, then arms the timer for the earliest
// expiry left.
func (s *Store) sweepAll(gen uint64) {
	w := &s.sweep
	w.mu.Lock()
	if gen != w.gen {
		w.mu.Unlock()
		return
	}
	w.timer = nil
	w.at.Store(math.MaxInt64)
	stops := w.stops
	w.running++
	w.mu.Unlock()

	next := int64(math.MaxInt64)
	for i := range s.shards {
		if w.stopped.Load() != stops {
			break
		}
		sh := &s.shards[i]
		for done := false; !done; {
			var c clock
			sh.mu.Lock()
			done = sh.reclaim(s, &c, sweepBatch)
			if done && len(sh.heap) > 0 {
				next = min(next, sh.heap[0].expires)
			}
			sh.mu.Unlock()
		}
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	w.running--
	if w.running == 0 {
		w.idle.Broadcast()
	}
	if stops == w.stops && next <= math.MaxInt64-sweepDelay {
		s.arm(next + sweepDelay)
	}
}

// Close stops the background sweep and waits for one under way to end, so
// that the store leaves no goroutine or timer behind, and ends every Follow
// under way (each returns an error matching ErrClosed); it always returns
// nil. The store stays usable: a later write arms the sweep again, so
// Breakers sharing one Store may each close it (kvbreaker.Breaker.Close
// does). A Store that is not closed holds a timer only while it holds
// entries, and a goroutine only while a sweep runs.
func (s *Store) Close() error {
	s.follow.close()
	w := &s.sweep
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stops++
	w.stopped.Store(w.stops)
	w.gen++
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.at.Store(math.MaxInt64)
	for w.running > 0 {
		w.idle.Wait()
	}
	return nil
}
