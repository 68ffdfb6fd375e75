package etcd

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// Why a Follow sends ChangeLost, besides the watch's own errors
// (rpctypes.ErrCompacted, rpctypes.ErrNoLeader, …), which Lost's Err wraps.
var (
	// ErrWatchBroken: the watch's gRPC stream broke (a reset connection,
	// a restarted server). clientv3 would reopen it and resume from the
	// next revision; Follow resynchronises instead, so that a server that
	// came back with other data (a restored backup, a wiped member) cannot
	// hand it a history that skips what it missed.
	ErrWatchBroken = errors.New("watch stream broken")
	// ErrWatchClosed: the watch channel closed without an error.
	ErrWatchClosed = errors.New("watch channel closed")
)

// beatsSent counts, over every feed of the process, the beats sent (a
// linearizable Range each, and a RequestProgress while the watch trails
// it): what the feed cost model (internal/model) is held to against the
// server's own count.
var beatsSent atomic.Int64

var _ driver.DemandFollower = (*Store)(nil)

// Follow's limits.
const (
	// followPage is how many keys one snapshot request returns, so that a
	// snapshot of a large prefix holds one page at a time.
	followPage = 512
	// maxPendingBeats bounds the heartbeats waiting for the watch to reach
	// their revision; a watch that far behind gets no Synced until it
	// catches up.
	maxPendingBeats = 8
)

// Follow implements driver.Follower with etcd's Watch from a revision, as
// the Kubernetes apiserver and reflector follow etcd: one linearizable
// range read of the prefix (in pages of 512 keys, every page at the first
// page's revision), then a watch of the prefix from the revision after it.
// A Put carries what Get returns: the value as stored (a value no Breaker
// wrote included) at its ModRevision. A Delete (a delete, or the expiry or
// revocation of the key's lease) carries the key's last ModRevision, which
// the watch reads with the event (WithPrevKV); NoVersion if the server had
// compacted it away.
//
// Synced: every heartbeat, Follow reads the cluster's current revision
// with a linearizable read started at t (a point read of one key, a Raft
// read index and no write) and asks the watch's server for a progress
// notification (RequestProgress); once the watch has delivered every event
// up to that revision, Follow sends Synced{At: t}. The read is what makes
// At true on a cluster of several members: a member's progress
// notification carries its own applied revision, which can lag a commit
// the leader has already acknowledged. An event batch proves its events'
// revisions, not its header's (a batch cut short while catching up carries
// the store's current revision in its header). So each heartbeat costs one
// read and a message on the open watch stream; with the store unreachable
// the reads fail and Synced stops, which is how a caller notices.
//
// Lost, then a resynchronisation (a new snapshot at the then current
// revision and a new watch), follows: a compacted start revision
// (rpctypes.ErrCompacted), a member without a leader (the watch requires
// one: clientv3.WithRequireLeader, so a partitioned member cancels it
// rather than fall silent), any broken watch stream (ErrWatchBroken: the
// stream is never reopened in place), a closed channel or a watch error.
// Lost's Err is a *driver.OpError (op "follow", Key the prefix). While the
// server refuses, Follow retries, backing off up to 1 s.
//
// Follow returns ctx's error when ctx ends, an OpError wrapping ErrClosed
// once the Store is closed, and an error when it cannot follow at all: a
// non-positive heartbeat, a nil fn, or the server refusing the first
// snapshot for lack of permission. It watches over the client's gRPC
// connection with a watcher of its own, so a client whose KV or Watcher
// was replaced (clientv3's namespace package) does not apply to it: use
// kvbreaker.Prefixed to keep a fleet's keys apart.
func (s *Store) Follow(ctx context.Context, prefix string, heartbeat time.Duration, fn func(driver.Change)) error {
	return s.follow(ctx, adapter.Feed{Prefix: prefix, Heartbeat: heartbeat, Fn: fn})
}

// FollowDemand implements driver.DemandFollower: Follow, but after each
// snapshot it beats only when want asks and its newest Synced is older than
// heartbeat (and a jitter of up to an eighth of it), so that a mirror with
// nothing to decide sends nothing. A beat is a put of the prefix's
// reserved key, which every follower of the prefix receives in revision
// order and dates by its own clock (beat.go): a fleet sends about one per
// heartbeat between its members. A client the server refuses the put
// (permission) beats for itself, as Follow does, only when asked.
func (s *Store) FollowDemand(ctx context.Context, prefix string, heartbeat time.Duration, want <-chan struct{}, fn func(driver.Change)) error {
	return s.follow(ctx, adapter.Feed{Prefix: prefix, Heartbeat: heartbeat, Demand: true, Want: want, Fn: fn})
}

func (s *Store) follow(ctx context.Context, feed adapter.Feed) error {
	f := &follower{Feed: feed, s: s, start: feed.Prefix, end: clientv3.GetPrefixRangeEnd(feed.Prefix)}
	if feed.Prefix == "" {
		// etcd has no empty key: the whole key space is ["\x00", "\x00").
		f.start = "\x00"
	}
	r := adapter.Resync{Gate: s.gate(), Session: f.session, Refused: refused, Wrap: s.callError}
	return r.Follow(ctx, feed.Prefix, feed.Heartbeat, feed.Demand, feed.Want, feed.Fn)
}

// follower is one Follow call's state.
type follower struct {
	adapter.Feed
	s          *Store
	start, end string // the prefix's key range
	// snapAt is when the newest snapshot's linearizable read was sent.
	snapAt time.Time
	// beats beats for the fleet (FollowDemand); perProcess: the server
	// refused this client the beat's put, and it beats for itself.
	beats      *fleetBeats
	perProcess bool
}

// session is a snapshot, then a watch from the revision after it.
func (f *follower) session(ctx context.Context) (began, synced bool, err error) {
	rev, began, err := f.snapshot(ctx)
	if err != nil {
		return began, false, err
	}
	return began, true, f.watch(ctx, rev)
}

// refused reports whether err means the server will not let this client
// follow at all, as opposed to not now.
func refused(err error) bool {
	for _, e := range []error{
		rpctypes.ErrPermissionDenied, rpctypes.ErrUserEmpty, rpctypes.ErrAuthFailed,
		rpctypes.ErrInvalidAuthToken, rpctypes.ErrInvalidAuthMgmt, rpctypes.ErrUserNotFound,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// snapshot delivers Reset, every key of the prefix and Synced, and returns
// the revision it read at. began says whether it delivered anything (a
// Reset), so that a failure after it is a Lost.
func (f *follower) snapshot(ctx context.Context) (rev int64, began bool, err error) {
	at := time.Now()
	from := f.start
	timeout := f.CallTimeout()
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(f.end), clientv3.WithLimit(followPage)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		resp, err := f.s.cli.Get(cctx, from, opts...)
		cancel()
		if err != nil {
			return rev, began, err
		}
		if rev == 0 {
			rev = resp.Header.Revision
			began = true
			f.Fn(driver.Change{Kind: driver.ChangeReset})
		}
		for _, kv := range resp.Kvs {
			if isBeatKey(kv.Key) {
				continue
			}
			f.Fn(driver.Change{Kind: driver.ChangePut, Key: string(kv.Key), Value: kv.Value, Version: driver.Version(kv.ModRevision)})
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	// Every commit acknowledged before at has a revision of at most rev:
	// the first page was a linearizable read sent after at.
	f.snapAt = at
	f.Synced(at)
	return rev, true, nil
}

// watch follows the prefix from revision rev+1 until the watch fails
// (the reason) or ctx ends (ctx's error).
func (f *follower) watch(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	w := clientv3.NewWatchFromWatchClient(&oneStream{WatchClient: pb.NewWatchClient(f.s.cli.ActiveConnection())}, f.s.cli)
	// Close waits for the watcher's goroutines, after cancel ends them.
	defer w.Close()
	wch := w.Watch(wctx, f.start, clientv3.WithRange(f.end), clientv3.WithRev(rev+1), clientv3.WithPrevKV())

	// On demand, no ticker: a beat only when asked.
	var tick <-chan time.Time
	if f.Want == nil {
		ticker := time.NewTicker(f.Heartbeat)
		defer ticker.Stop()
		tick = ticker.C
	}
	if f.Want != nil {
		if f.beats == nil {
			f.beats = newFleetBeats(f)
		}
		f.beats.restart(f.snapAt, rev)
	}
	seen := rev // every event up to seen has been delivered
	// Heartbeats waiting for the watch: once it has delivered every event
	// up to a beat's revision, every commit acknowledged before the beat
	// has been delivered.
	pending := adapter.PendingBeats[int64]{Max: maxPendingBeats}
	beatNow := func() {
		at := time.Now()
		cur, err := f.currentRevision(ctx)
		if err != nil {
			// No Synced: the caller sees the feed fall behind.
			return
		}
		beatsSent.Add(1)
		if f.beats != nil {
			// Every beat after cur committed after at: the fleet's
			// beats can be dated from here too.
			f.beats.anchored(at, cur)
		}
		pending.Add(at, cur)
		f.proven(&pending, seen)
		if _, waiting := pending.Newest(); waiting {
			pctx, pcancel := context.WithTimeout(wctx, f.Heartbeat)
			_ = w.RequestProgress(pctx) // a lost request only delays Synced
			pcancel()
		}
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case wr, ok := <-wch:
			if !ok {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return ErrWatchClosed
			}
			if err := wr.Err(); err != nil {
				return err
			}
			if wr.Canceled {
				return ErrWatchClosed
			}
			if n := len(wr.Events); n > 0 {
				for _, ev := range wr.Events {
					if isBeatKey(ev.Kv.Key) {
						f.beatEvent(ev)
						continue
					}
					f.Fn(change(ev))
				}
				seen = max(seen, wr.Events[n-1].Kv.ModRevision)
			} else if wr.IsProgressNotify() {
				// Sent only once the watch has delivered everything up to
				// the member's revision (mvcc progressIfSync).
				seen = max(seen, wr.Header.Revision)
			}
			f.proven(&pending, seen)
		case <-tick:
			beatNow()
		case <-f.Want:
			// Not while the newest Synced is fresh, nor while a beat
			// sent within the heartbeat waits for the watch.
			now := time.Now()
			if !f.perProcess {
				if err := f.beats.overdue(now); err != nil {
					return err
				}
				if !f.beats.due(now) {
					continue
				}
				refused, err := f.beats.send(ctx)
				if !refused || noFallback.Load() {
					_ = err // no Synced: the caller sees the feed fall behind
					continue
				}
				f.perProcess = true
				beatCounts.fallbacks.Add(1)
			}
			if newest, waiting := pending.Newest(); !f.Due(now, newest, waiting) {
				continue
			}
			beatNow()
		}
	}
}

// beatEvent handles an event of a beat key: not a record; on demand, a
// beat that may prove the feed current.
func (f *follower) beatEvent(ev *clientv3.Event) {
	if f.beats == nil || ev.Type != clientv3.EventTypePut {
		return
	}
	if at, ok := f.beats.received(ev.Kv.ModRevision, ev.Kv.Value, time.Now()); ok {
		f.Synced(at)
	}
}

// proven sends Synced for the latest pending beat the watch has reached,
// having delivered every event up to revision seen.
func (f *follower) proven(pending *adapter.PendingBeats[int64], seen int64) {
	if at, ok := pending.Reached(seen); ok {
		f.Synced(at)
	}
}

// currentRevision is the cluster's revision by a linearizable read (of
// one key, counting only), within a heartbeat.
func (f *follower) currentRevision(ctx context.Context) (int64, error) {
	cctx, cancel := context.WithTimeout(ctx, f.Heartbeat)
	defer cancel()
	resp, err := f.s.cli.Get(cctx, f.start, clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// change is the Change an event reports.
func change(ev *clientv3.Event) driver.Change {
	if ev.Type == clientv3.EventTypeDelete {
		c := driver.Change{Kind: driver.ChangeDelete, Key: string(ev.Kv.Key), Version: driver.NoVersion}
		if ev.PrevKv != nil {
			c.Version = driver.Version(ev.PrevKv.ModRevision)
		}
		return c
	}
	return driver.Change{Kind: driver.ChangePut, Key: string(ev.Kv.Key), Value: ev.Kv.Value, Version: driver.Version(ev.Kv.ModRevision)}
}

// oneStream lets a watcher open one gRPC stream: clientv3 reopens a broken
// stream and resumes each watch from its next revision, which Follow does
// not trust past a gap it cannot see; refusing the reopen ends the watch
// with ErrWatchBroken (an error clientv3 does not retry).
type oneStream struct {
	pb.WatchClient
	opened atomic.Bool
}

func (o *oneStream) Watch(ctx context.Context, opts ...grpc.CallOption) (pb.Watch_WatchClient, error) {
	if o.opened.Load() {
		return nil, ErrWatchBroken
	}
	wc, err := o.WatchClient.Watch(ctx, opts...)
	if err == nil {
		o.opened.Store(true)
	}
	return wc, err
}
