package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// DefaultFollowQueue is how many changes a follower may have queued unread
// before the store gives up on it (see Store.Follow).
const DefaultFollowQueue = 1 << 14

// ErrClosed is what Follow returns when the store's Close ends it.
var ErrClosed = errors.New("store closed")

// WithFollowQueue bounds each follower's queue at n changes (default
// DefaultFollowQueue; n <= 0 means the default). A follower that falls
// further behind receives ChangeLost and a new snapshot.
func WithFollowQueue(n int) Option { return func(o *options) { o.followQueue = n } }

// follows is a store's set of followers.
type follows struct {
	// list is read by every write, under its shard's lock; replaced (not
	// changed) under mu and every shard's lock, so a write either reaches
	// a follower or is in its snapshot.
	list  atomic.Pointer[[]*follower]
	mu    sync.Mutex
	queue int
	// closed is closed by Close, ending the Follows that took it; the
	// next Follow makes a new one (the store stays usable).
	closed chan struct{}
}

// follower is one Follow's queue. Writers append to it holding their
// shard's lock, and never wait for the follower: past its bound the queue is
// dropped and lost set, and the follower resynchronises.
type follower struct {
	prefix string
	limit  int
	wake   chan struct{}

	mu    sync.Mutex
	queue []driver.Change
	lost  error
}

func (f *follower) push(c driver.Change) {
	f.mu.Lock()
	switch {
	case f.lost != nil:
	case len(f.queue) >= f.limit:
		f.lost = fmt.Errorf("follower fell %d changes behind", f.limit)
		f.queue = nil
	default:
		f.queue = append(f.queue, c)
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// publish hands c to every follower of its key; the key's shard lock is
// held, so each follower receives a key's changes in commit order. With no
// follower it costs one atomic load.
func (s *Store) publish(c driver.Change) {
	fs := s.follow.list.Load()
	if fs == nil {
		return
	}
	for _, f := range *fs {
		if strings.HasPrefix(c.Key, f.prefix) {
			f.push(c)
		}
	}
}

func (fl *follows) close() {
	fl.mu.Lock()
	if fl.closed != nil {
		close(fl.closed)
		fl.closed = nil
	}
	fl.mu.Unlock()
}

// lockAll takes the follow set's and every shard's lock, in one order.
func (s *Store) lockAll() {
	s.follow.mu.Lock()
	for i := range s.shards {
		s.shards[i].mu.Lock()
	}
}

func (s *Store) unlockAll() {
	for i := range s.shards {
		s.shards[i].mu.Unlock()
	}
	s.follow.mu.Unlock()
}

// subscribe (re)starts f: with every write stopped, it empties f's queue,
// adds f to the followers (when add) and takes the snapshot of its prefix,
// ending in Synced. Every write after it is in f's queue, every one before
// in the snapshot.
func (s *Store) subscribe(f *follower, add bool) (snap []driver.Change, closed <-chan struct{}) {
	s.lockAll()
	defer s.unlockAll()
	if add {
		old := s.follow.list.Load()
		var list []*follower
		if old != nil {
			list = append(list, *old...)
		}
		list = append(list, f)
		s.follow.list.Store(&list)
		if s.follow.closed == nil {
			s.follow.closed = make(chan struct{})
		}
		closed = s.follow.closed
	}
	f.mu.Lock()
	f.queue, f.lost = nil, nil
	f.mu.Unlock()
	snap = append(snap, driver.Change{Kind: driver.ChangeReset})
	var c clock
	for i := range s.shards {
		for k, v := range s.shards[i].entries.Range {
			e := v.(*entry)
			if !strings.HasPrefix(k.(string), f.prefix) {
				continue
			}
			if c.get(s); expired(e, &c) {
				continue
			}
			snap = append(snap, driver.Change{Kind: driver.ChangePut, Key: e.key, Value: e.value, Version: e.version})
		}
	}
	return append(snap, driver.Change{Kind: driver.ChangeSynced, At: time.Now()}), closed
}

func (s *Store) unsubscribe(f *follower) {
	s.lockAll()
	defer s.unlockAll()
	old := *s.follow.list.Load()
	list := make([]*follower, 0, len(old))
	for _, g := range old {
		if g != f {
			list = append(list, g)
		}
	}
	if len(list) == 0 {
		s.follow.list.Store(nil)
	} else {
		s.follow.list.Store(&list)
	}
}

// Follow implements driver.Follower. The snapshot is taken with every
// write stopped (each shard's lock held, O(keys) time), so a store holding
// many keys pauses its writers for that long once per Follow and per
// resynchronisation. Each write then reaches every follower of its key
// through the follower's own queue of at most DefaultFollowQueue changes
// (WithFollowQueue): a write never waits for a follower; a follower that
// falls further behind receives ChangeLost and a new snapshot. Each expiry
// is delivered as a ChangeDelete when the store frees the entry, up to
// about a second after the key stopped being readable (see Store), or on an
// injected clock when a write frees it. Synced's At is read from time.Now,
// whatever clock judges expiry. Close ends every Follow with ErrClosed.
func (s *Store) Follow(ctx context.Context, prefix string, heartbeat time.Duration, fn func(driver.Change)) error {
	if err := adapter.FollowArgs(heartbeat, fn); err != nil {
		return opError(adapter.OpFollow, prefix, err)
	}
	if err := ctx.Err(); err != nil {
		return opError(adapter.OpFollow, prefix, err)
	}
	f := &follower{prefix: prefix, limit: s.follow.queue, wake: make(chan struct{}, 1)}
	snap, closed := s.subscribe(f, true)
	defer s.unsubscribe(f)
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	done := func() error {
		select {
		case <-ctx.Done():
			return opError(adapter.OpFollow, prefix, ctx.Err())
		case <-closed:
			return opError(adapter.OpFollow, prefix, ErrClosed)
		default:
			return nil
		}
	}
	deliver := func(cs []driver.Change) error {
		for i, c := range cs {
			if i%1024 == 1023 {
				if err := done(); err != nil {
					return err
				}
			}
			// Entries are never changed, but fn may keep or change
			// Value: it gets its own copy.
			c.Value = clone(c.Value)
			fn(c)
		}
		return nil
	}
	if err := deliver(snap); err != nil {
		return err
	}
	var buf []driver.Change
	for {
		synced := false
		select {
		case <-ctx.Done():
			return opError(adapter.OpFollow, prefix, ctx.Err())
		case <-closed:
			return opError(adapter.OpFollow, prefix, ErrClosed)
		case <-f.wake:
		case <-tick.C:
			synced = true
		}
		f.mu.Lock()
		buf, f.queue = f.queue, buf[:0]
		lost := f.lost
		// Every write before at is in buf or was delivered before it.
		at := time.Now()
		f.mu.Unlock()
		if lost != nil {
			fn(driver.Change{Kind: driver.ChangeLost, Err: opError(adapter.OpFollow, prefix, lost)})
			snap, _ = s.subscribe(f, false)
			if err := deliver(snap); err != nil {
				return err
			}
			continue
		}
		if err := deliver(buf); err != nil {
			return err
		}
		clear(buf) // drop the values for the collector
		if synced {
			fn(driver.Change{Kind: driver.ChangeSynced, At: at})
		}
	}
}
