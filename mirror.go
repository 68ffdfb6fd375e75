package kvbreaker

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

// The reasons Observer.Mirror reports (MirrorInfo.Reason).
const (
	mirrorSynced  = "synced"
	mirrorLost    = "lost"
	mirrorStale   = "stale"
	mirrorOverCap = "over_cap"
	mirrorEnded   = "ended"
)

// mirrorOverCapRetry is how long a mirror over its cap waits before it
// follows again: each attempt reads a snapshot of every record, which over
// the cap is the costliest request a Breaker makes.
const mirrorOverCapRetry = time.Minute

// mirrorRetry bounds the pause between attempts to follow after a feed
// ended with an error: from mirrorRetryMin, doubling, up to mirrorRetryMax.
const (
	mirrorRetryMin = 100 * time.Millisecond
	mirrorRetryMax = 10 * time.Second
)

const mirrorShards = 64

// mirror is a Breaker's copy of its store's records, kept by one Follow.
//
// Callers read it (get) and record what their own writes and conflicts
// taught them (learn); the follow goroutine applies the feed. Each host's
// entry keeps the feed's record and, over it, what this worker learnt that
// the feed has not delivered yet (own): the feed lags this worker's writes,
// and an older record arriving through it must not undo one. own is
// dropped when the feed delivers the version it names, or when a Synced
// shows that every commit before own was learnt has been delivered (so the
// feed's record is at least as new). Versions are only compared for
// equality: the driver orders none.
//
// A feed of invalidations (driver.ChangeStale) leaves a host's feed record
// unknown: the next call on that host reads the store once and puts what
// it found in the mirror, unless the feed changed the host while the read
// was under way (each feed change of a host gives its entry a new seq), so
// a read never installs an older state over a newer change.
type mirror struct {
	b     *Breaker
	f     driver.Follower
	size  int
	stale time.Duration
	// want, for a feed that beats on demand (driver.DemandFollower), asks
	// it for a beat: a call sends on it, without waiting, when the newest
	// Synced is older than the heartbeat; nil for a feed that beats on its
	// own. beatAge is that heartbeat, in nanoseconds.
	want    chan struct{}
	beatAge int64
	// base is the monotonic origin of until.
	base time.Time
	// until is the instant, in nanoseconds since base, up to which the
	// mirror decides: its last Synced.At plus stale; 0 while unhealthy.
	until atomic.Int64
	// healthy is the state last reported to Observer.Mirror.
	healthy atomic.Bool
	seed    maphash.Seed
	shards  [mirrorShards]mirrorShard

	pendMu sync.Mutex
	// pending: hosts with an own entry, and when it was learnt.
	pending map[string]time.Time

	// count is the hosts with a record, or an unknown one, in the feed:
	// changed by the follow goroutine, and by a call whose read found a
	// host absent.
	count atomic.Int64

	// The feed's state, touched only on the follow goroutine (Follow
	// calls its function on the goroutine that called it).
	synced bool
	seq    uint64 // feed changes applied, numbering each entry's last
	over   bool
	stop   context.CancelFunc // ends the current Follow

	cancel context.CancelFunc
	done   chan struct{}
}

type mirrorShard struct {
	mu sync.RWMutex
	m  map[string]*mirrorEntry
	_  [40]byte // keep neighbouring shards' locks off one cache line
}

type mirrorEntry struct {
	feed   current
	inFeed bool
	// stale: the feed said the host changed after feed (ChangeStale), so
	// its record is unknown until read.
	stale bool
	// seq numbers the feed's last change of the host: a read installs
	// its result only if it is unchanged since the read began.
	seq uint64
	// staleAt is when the last Stale arrived: the arrival of this
	// worker's own write, for MirrorLag, when it came before learn.
	staleAt time.Time
	own     *ownEntry
}

// ownEntry is what this worker learnt of a host ahead of the feed: its own
// write, or the current record a conflict returned.
type ownEntry struct {
	cur current
	// del: the record is absent (this worker deleted it, or found it
	// absent); match is the version whose delivery makes own redundant
	// (for del, the deleted version, NoVersion when unknown).
	del   bool
	match driver.Version
	// sent is when this worker's write was sent, for MirrorLag; zero for
	// a record a conflict taught.
	sent time.Time
}

func newMirror(b *Breaker, f driver.Follower, size int, stale time.Duration) *mirror {
	if size == 0 {
		size = defaultMirrorSize
	}
	if stale == 0 {
		stale = defaultMirrorStaleness
	}
	m := &mirror{b: b, f: f, size: size, stale: stale, base: time.Now(), seed: maphash.MakeSeed(), pending: map[string]time.Time{}, done: make(chan struct{})}
	for i := range m.shards {
		m.shards[i].m = map[string]*mirrorEntry{}
	}
	if st, ok := f.(driver.Store); ok && demandFollows(st) {
		m.want = make(chan struct{}, 1)
		m.beatAge = int64(m.heartbeat())
	}
	return m
}

// heartbeat is what the mirror asks of the feed. A feed that beats on its
// own beats every quarter of MirrorStaleness, so that three beats may be
// late before the mirror stops deciding. A feed that beats on demand is
// asked for a beat once its newest Synced is three quarters of
// MirrorStaleness old, which leaves the beat a quarter to arrive: a beat
// serves the whole fleet, and the later it is asked for the fewer a fleet
// sends (about one per heartbeat while any member decides).
func (m *mirror) heartbeat() time.Duration {
	if m.want != nil {
		return m.stale * 3 / 4
	}
	return m.stale / 4
}

func (m *mirror) start() {
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go m.run(ctx)
}

// close ends the feed and waits for the follow goroutine.
func (m *mirror) close() {
	m.cancel()
	<-m.done
}

// run follows the store until ctx ends, again after each feed that ends.
func (m *mirror) run(ctx context.Context) {
	defer close(m.done)
	wait := mirrorRetryMin
	for {
		fctx, stop := context.WithCancel(ctx)
		m.stop = stop
		m.synced, m.over = false, false
		var err error
		if df, ok := m.f.(driver.DemandFollower); ok && m.want != nil {
			err = df.FollowDemand(fctx, "", m.heartbeat(), m.want, m.apply)
		} else {
			err = m.f.Follow(fctx, "", m.heartbeat(), m.apply)
		}
		stop()
		if ctx.Err() != nil {
			m.down(ctx, mirrorEnded, ctx.Err())
			return
		}
		pause := wait
		switch {
		case m.over:
			pause = mirrorOverCapRetry
		case errors.Is(err, errors.ErrUnsupported):
			m.down(ctx, mirrorEnded, err)
			m.b.log.Warn("kvbreaker: the store cannot follow its keys; every call reads it", "err", err)
			return
		default:
			m.down(ctx, mirrorEnded, err)
			if m.synced {
				wait = mirrorRetryMin
			}
			wait = min(2*wait, mirrorRetryMax)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// decides reports whether the mirror may decide at mono (the monotonic
// clock); the first call that finds it stale reports so.
func (m *mirror) decides(ctx context.Context, mono time.Time) bool {
	u := m.until.Load()
	now := int64(mono.Sub(m.base))
	if now < u {
		if m.want != nil && now-(u-int64(m.stale)) >= m.beatAge {
			m.wish()
		}
		return true
	}
	if u != 0 {
		if m.want != nil {
			m.wish()
		}
		if m.healthy.Load() {
			m.report(ctx, false, mirrorStale, nil)
		}
	}
	return false
}

// wish asks a feed that beats on demand for a beat, unless it has been
// asked already.
func (m *mirror) wish() {
	select {
	case m.want <- struct{}{}:
	default:
	}
}

// report tells Observer.Mirror of a change of health, once per change.
func (m *mirror) report(ctx context.Context, healthy bool, why string, err error) {
	if !m.healthy.CompareAndSwap(!healthy, healthy) {
		return
	}
	if h := m.b.obs.Mirror; h != nil {
		h(ctx, MirrorInfo{Healthy: healthy, Reason: why, Err: err})
	}
}

// down stops the mirror deciding.
func (m *mirror) down(ctx context.Context, why string, err error) {
	m.until.Store(0)
	m.report(ctx, false, why, err)
}

func (m *mirror) shard(host string) *mirrorShard {
	return &m.shards[maphash.String(m.seed, host)%mirrorShards]
}

// get returns host's record as the mirror knows it (absent: the zero
// current); known is false when the feed said it changed and no read
// since has told what it holds, and seq is then what install needs.
func (m *mirror) get(host string) (cur current, seq uint64, known bool) {
	sh := m.shard(host)
	sh.mu.RLock()
	e := sh.m[host]
	known = true
	switch {
	case e == nil:
	case e.own != nil:
		cur = e.own.cur
	case e.stale:
		seq, known = e.seq, false
	case e.inFeed:
		cur = e.feed
	}
	sh.mu.RUnlock()
	return cur, seq, known
}

// install puts got, what a read of host found, in the mirror, unless the
// feed changed host after get returned seq (a Stale, Put or Delete that
// arrived during the read may report a change the read did not see) or a
// resync began.
func (m *mirror) install(host string, got current, seq uint64) {
	sh := m.shard(host)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[host]
	if e == nil || !e.stale || e.seq != seq {
		return
	}
	e.stale = false
	if got.ver != driver.NoVersion {
		e.feed, e.inFeed = got, true
		return
	}
	m.count.Add(-1)
	if e.own == nil {
		delete(sh.m, host)
	}
}

// learn records what this worker's call learnt of host ahead of the feed:
// cur is the record now stored (for del, absent, deleted at version
// match); sent is when its own write was sent (zero for what a conflict
// returned).
func (m *mirror) learn(host string, cur current, del bool, match driver.Version, sent time.Time) {
	if !del {
		match = cur.ver
	}
	sh := m.shard(host)
	sh.mu.Lock()
	e := sh.m[host]
	if e == nil {
		e = &mirrorEntry{}
		sh.m[host] = e
	}
	if !del && e.inFeed && e.feed.ver == cur.ver {
		// The feed was faster than the call's return.
		e.own = nil
		sh.mu.Unlock()
		m.lag(sent)
		return
	}
	var arrived time.Duration
	if !sent.IsZero() && !e.staleAt.IsZero() && !e.staleAt.Before(sent) {
		// A feed of invalidations said the host changed after the write
		// was sent: the write's arrival, faster than the call's return.
		arrived, sent = e.staleAt.Sub(sent), time.Time{}
	}
	e.own = &ownEntry{cur: cur, del: del, match: match, sent: sent}
	sh.mu.Unlock()
	if arrived > 0 {
		m.reportLag(arrived)
	}
	// Taken after the write returned: a Synced at or after it covers the
	// write.
	at := time.Now()
	m.pendMu.Lock()
	m.pending[host] = at
	m.pendMu.Unlock()
}

// lag reports the feed's delay for a write sent at sent.
func (m *mirror) lag(sent time.Time) {
	if !sent.IsZero() {
		m.reportLag(time.Since(sent))
	}
}

func (m *mirror) reportLag(d time.Duration) {
	if h := m.b.obs.MirrorLag; h != nil {
		h(context.Background(), MirrorLagInfo{Lag: d})
	}
}

// apply applies one change of the feed; it runs on the follow goroutine.
func (m *mirror) apply(c driver.Change) {
	ctx := context.Background()
	switch c.Kind {
	case driver.ChangeReset:
		m.synced = false
		m.until.Store(0)
		m.clear(true)
	case driver.ChangePut, driver.ChangeDelete, driver.ChangeStale:
		if m.over {
			return
		}
		m.change(c)
		if m.count.Load() > int64(m.size) {
			m.over = true
			m.clear(false)
			m.down(ctx, mirrorOverCap, nil)
			m.stop()
		}
	case driver.ChangeSynced:
		if m.over {
			return
		}
		m.settle(c.At)
		m.synced = true
		m.until.Store(max(int64(c.At.Add(m.stale).Sub(m.base)), 1))
		m.report(ctx, true, mirrorSynced, nil)
	case driver.ChangeLost:
		m.synced = false
		m.down(ctx, mirrorLost, c.Err)
	}
}

// change applies a Put, a Delete or a Stale.
func (m *mirror) change(c driver.Change) {
	var rec record.Record
	if c.Kind == driver.ChangePut {
		rec = m.b.decode(context.Background(), c.Key, c.Value)
	}
	var arrived time.Time
	if c.Kind == driver.ChangeStale {
		arrived = time.Now()
	}
	m.seq++
	sh := m.shard(c.Key)
	sh.mu.Lock()
	e := sh.m[c.Key]
	if e == nil {
		if c.Kind == driver.ChangeDelete {
			sh.mu.Unlock()
			return
		}
		e = &mirrorEntry{}
		sh.m[c.Key] = e
	}
	e.seq = m.seq
	var sent time.Time
	settled := false
	if o := e.own; o != nil {
		switch {
		case c.Kind == driver.ChangePut && !o.del && c.Version == o.match,
			c.Kind == driver.ChangeDelete && o.del && (o.match == driver.NoVersion || c.Version == driver.NoVersion || c.Version == o.match):
			e.own, sent, settled = nil, o.sent, true
		case c.Kind == driver.ChangeStale && !o.sent.IsZero():
			// A feed of invalidations names no version: the first
			// change of the host after this worker's write is taken
			// as its arrival, for MirrorLag only. own stays until a
			// Synced covers it.
			sent, o.sent = o.sent, time.Time{}
		}
	}
	had := e.inFeed || e.stale
	switch c.Kind {
	case driver.ChangePut:
		e.feed, e.inFeed, e.stale = current{rec: rec, ver: c.Version}, true, false
	case driver.ChangeDelete:
		e.feed, e.inFeed, e.stale = current{}, false, false
	case driver.ChangeStale:
		e.feed, e.inFeed, e.stale, e.staleAt = current{}, false, true, arrived
	}
	switch has := e.inFeed || e.stale; {
	case has && !had:
		m.count.Add(1)
	case had && !has:
		m.count.Add(-1)
	}
	if !e.inFeed && !e.stale && e.own == nil {
		delete(sh.m, c.Key)
	}
	sh.mu.Unlock()
	if settled {
		m.pendMu.Lock()
		delete(m.pending, c.Key)
		m.pendMu.Unlock()
	}
	if !sent.IsZero() {
		if arrived.IsZero() {
			arrived = time.Now()
		}
		m.reportLag(arrived.Sub(sent))
	}
}

// settle drops the own entries learnt before at: the feed has delivered
// every commit before at, so its record is at least as new.
func (m *mirror) settle(at time.Time) {
	m.pendMu.Lock()
	if len(m.pending) == 0 {
		m.pendMu.Unlock()
		return
	}
	var hosts []string
	for h, t := range m.pending {
		if t.Before(at) {
			hosts = append(hosts, h)
			delete(m.pending, h)
		}
	}
	m.pendMu.Unlock()
	for _, h := range hosts {
		sh := m.shard(h)
		sh.mu.Lock()
		if e := sh.m[h]; e != nil {
			e.own = nil
			if !e.inFeed && !e.stale {
				delete(sh.m, h)
			}
		}
		sh.mu.Unlock()
	}
}

// clear forgets the feed's records; keepOwn keeps what this worker learnt
// ahead of the feed (a Reset: the snapshot may predate it).
func (m *mirror) clear(keepOwn bool) {
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		if !keepOwn {
			sh.m = map[string]*mirrorEntry{}
		} else {
			for h, e := range sh.m {
				if e.own == nil {
					delete(sh.m, h)
				} else {
					e.feed, e.inFeed, e.stale = current{}, false, false
				}
			}
		}
		sh.mu.Unlock()
	}
	// After the shards: a read that found a host absent and uncounted it
	// meanwhile is not left out of the count.
	m.count.Store(0)
	if !keepOwn {
		m.pendMu.Lock()
		clear(m.pending)
		m.pendMu.Unlock()
	}
}
