package model

import (
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// The mirror (Settings.Mirror over a driver.Follower), on simulated time:
// while a process's feed is healthy its Breaker decides from a local mirror
// of the shared store, and its writes still compare-and-swap against the
// store. The model runs each process's real Breaker over a procStore whose
// reads are answered by the process's mirror, free, and whose writes reach
// the shared store and are counted. The protocol's rules, one by one:
//
//   - Allow, and the read before a write, cost no request: the mirror's
//     record decides.
//   - A write compare-and-swaps against the mirror's version; a conflict
//     returns the store's record and the Breaker retries on it, as on any
//     store. So a Success on a host the mirror knows absent costs nothing,
//     and a stale mirror costs a lost compare-and-swap, never a wrong write.
//   - This process's own writes enter its mirror at once, and so does the
//     store's current record a lost compare-and-swap returns: the Breaker
//     holds it already, and without it every call in the process until
//     the winner's commit arrives would lose another compare-and-swap
//     (at a restraint's end, every process with a held message asks).
//   - Every other commit, and the store's expiry of a record, reaches a
//     process's mirror delay after it happened, in commit order.
//   - On a feed of invalidations (Redis, PostgreSQL: driver.ChangeStale)
//     each change that arrives, this process's own included, leaves the
//     key to be read when the process is next asked about it: one read
//     (mirror.onUse), however many changes arrived since the last. The
//     model decides, as over a feed of values, on the commit that
//     arrived; the read there would return that commit or a later one.
//
// The feed never breaks here (no Lost): the simulator measures what a
// healthy feed's propagation delay changes, not a resync.
//
// Each process's Breaker is told its store is not atomic (Traits.Atomic
// false) so that it reads before every write rather than writing on a
// remembered hint: with a mirror the record a write is decided on is the
// mirror's, read for free, which is what that read returns here. The
// memory store below still compares every write.

// feed is the shared store's commits in commit order, as every process's
// mirror receives them.
type feed struct {
	delay time.Duration
	procs int
	log   []commit
	// base is the index of log[0] since the first commit: log's prefix
	// every mirror has passed is dropped.
	base    int
	mirrors []*mirror
	// last is each key's newest commit, to tell when the store expired it.
	last map[string]commit
	// changes counts commits.
	changes int
	// writes is every commit's process and instant, in commit order.
	writes []Write
}

// Write is one commit of a process (WithMirror), for what-if costings of
// a feed whose changes would date it (see DemandFleet.Commit).
type Write struct {
	Proc int
	At   time.Time
}

// commit is one write the shared store accepted.
type commit struct {
	seq     int // its place in commit order, from 0
	at      time.Time
	proc    int
	key     string
	present bool
	value   []byte
	ver     driver.Version // the version written, or deleted
	expires time.Time      // present: when the store expires it
}

func newFeed(delay time.Duration, procs int) *feed {
	return &feed{delay: delay, procs: procs, last: make(map[string]commit)}
}

// add records c, committed by c.proc, and returns it numbered.
func (f *feed) add(c commit) commit {
	c.seq = f.base + len(f.log)
	f.last[c.key] = c
	f.changes++
	f.writes = append(f.writes, Write{Proc: c.proc, At: c.at})
	f.log = append(f.log, c)
	if len(f.log) >= 4096 {
		f.trim()
	}
	return c
}

// trim drops the commits every mirror has applied.
func (f *feed) trim() {
	low := f.base + len(f.log)
	for _, m := range f.mirrors {
		low = min(low, m.next)
	}
	if n := low - f.base; n > len(f.log)/2 {
		f.log = append(f.log[:0], f.log[n:]...)
		f.base = low
	}
}

// mirror is one process's copy of the shared store.
type mirror struct {
	f    *feed
	proc int
	m    map[string]mirrorEntry
	next int // the feed's index of the next commit to receive
	// skipOwn is a mutant for tests: own writes do not enter the mirror.
	skipOwn bool
	// onUse counts the reads a feed of invalidations costs: a key read
	// when next asked about after a change arrived (see Cost.FeedReads);
	// onUseOwn those of them after changes that were all this process's
	// own (Cost.FeedReadsOwn).
	onUse, onUseOwn int
}

// mirrorEntry is a key as the mirror knows it, as of every commit before
// next: a commit arriving later from before that (this process learnt of
// something newer first) is not applied.
type mirrorEntry struct {
	present bool
	value   []byte
	ver     driver.Version
	expires time.Time
	next    int
	// dirty: a change arrived (this process's own write's too) and the
	// key has not been asked about since; others: one of them was not
	// this process's own (another's commit, the store's expiry).
	dirty, others bool
}

func (f *feed) newMirror(proc int) *mirror {
	m := &mirror{f: f, proc: proc, m: make(map[string]mirrorEntry)}
	f.mirrors = append(f.mirrors, m)
	return m
}

// receive applies every other process's commit that has reached this
// mirror by now.
func (m *mirror) receive(now time.Time) {
	f := m.f
	for m.next < f.base+len(f.log) {
		c := &f.log[m.next-f.base]
		if c.at.Add(f.delay).After(now) {
			return
		}
		m.next++
		if c.proc != m.proc {
			m.apply(c)
		}
		// Every change arrives as an invalidation, whatever the mirror
		// knew of it already (this process's own write, the record a
		// lost compare-and-swap returned).
		if e, ok := m.m[c.key]; ok {
			e.dirty = true
			e.others = e.others || c.proc != m.proc
			m.m[c.key] = e
		}
	}
}

// apply takes c unless the mirror already holds something newer (this
// process's own later write).
func (m *mirror) apply(c *commit) {
	if e, ok := m.m[c.key]; ok && e.next > c.seq {
		return
	}
	m.m[c.key] = mirrorEntry{present: c.present, value: c.value, ver: c.ver, expires: c.expires, next: c.seq + 1,
		dirty: c.proc != m.proc, others: c.proc != m.proc}
}

// own applies this process's write at once.
func (m *mirror) own(c commit) {
	if m.skipOwn {
		return
	}
	m.apply(&c)
}

// current applies the store's current record for key, which a lost
// compare-and-swap returned (present or not): the key's newest commit.
func (m *mirror) current(key string, present bool) {
	f := m.f
	e := mirrorEntry{next: f.base + len(f.log)}
	if c := f.last[key]; present && c.present {
		e.present, e.value, e.ver, e.expires = true, c.value, c.ver, c.expires
	}
	m.m[key] = e
}

// get is key as the mirror holds it at now: a record the store expired
// is still there until the expiry has propagated. use: the Breaker asks
// (not the model peeking).
func (m *mirror) get(key string, now time.Time, use bool) mirrorEntry {
	m.receive(now)
	e, ok := m.m[key]
	if e.present && !now.Before(e.expires.Add(m.f.delay)) {
		e = mirrorEntry{ver: e.ver, next: e.next, dirty: true, others: true}
	}
	if use && e.dirty {
		m.onUse++
		if !e.others {
			m.onUseOwn++
		}
		e.dirty, e.others = false, false
	}
	if use && ok {
		m.m[key] = e
	}
	return e
}

// lag is how long ago the oldest change to key that this mirror has not
// yet received was committed (or the store expired key's record); zero
// when it has them all.
func (m *mirror) lag(key string, now time.Time) time.Duration {
	m.receive(now)
	var d time.Duration
	if e := m.m[key]; e.present && !now.Before(e.expires) {
		d = now.Sub(e.expires)
	}
	f := m.f
	for i := m.next; i < f.base+len(f.log); i++ {
		if c := &f.log[i-f.base]; c.key == key && c.proc != m.proc {
			return max(d, now.Sub(c.at))
		}
	}
	return d
}
