package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

var _ driver.Follower = (*Store)(nil)

// FollowClientName names the connections of Follow in CLIENT LIST when the
// Store's client sets no name of its own.
const FollowClientName = "kvbreaker-follow"

// invalidateChannel is where Redis publishes the invalidations of a
// tracking connection that redirects them to a RESP2 connection.
const invalidateChannel = "__redis__:invalidate"

// Follow implements driver.Follower with CLIENT TRACKING in BCAST mode on
// prefix (see "Following" in the package doc). It needs a *redis.Client of
// one server; a ClusterClient, a Ring, a failover (Sentinel) client and a
// Store declared WithReplicaReads return an error matching
// errors.ErrUnsupported. Errors before the first snapshot starts (the
// server refused, or could not be reached) are returned; after that, every
// failure is a ChangeLost and a resynchronisation, retried until ctx ends,
// but for a refusal: after maxRefusedSessions sessions in a row refused
// with NOPERM (an ACL that denies the feed what it needs), Follow returns
// an error saying so.
func (s *Store) Follow(ctx context.Context, prefix string, heartbeat time.Duration, fn func(driver.Change)) error {
	return s.follow(ctx, prefix, heartbeat, false, nil, fn)
}

// FollowDemand implements driver.DemandFollower: Follow, but after each
// session's first Synced it beats only when want asks and its newest Synced
// is older than heartbeat, and the beat is a PUBLISH on
// __redis__:invalidate that every follower of the server receives (see
// "Following" in the package doc).
func (s *Store) FollowDemand(ctx context.Context, prefix string, heartbeat time.Duration, want <-chan struct{}, fn func(driver.Change)) error {
	return s.follow(ctx, prefix, heartbeat, true, want, fn)
}

func (s *Store) follow(ctx context.Context, prefix string, heartbeat time.Duration, demand bool, want <-chan struct{}, fn func(driver.Change)) error {
	const op = adapter.OpFollow
	if err := s.gate().Follow(prefix, heartbeat, demand, want, fn); err != nil {
		return err
	}
	c, err := s.followable()
	if err != nil {
		return opError(op, prefix, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop, ok := s.startFollow(cancel)
	if !ok {
		return opError(op, prefix, ErrClosed)
	}
	defer stop()

	f := &follower{s: s, prefix: prefix, hb: heartbeat, fn: fn, want: want}
	f.fc = goredis.NewClient(f.options(c.Options()))
	defer f.fc.Close()
	err = f.run(ctx)
	if s.closed.Load() {
		return opError(op, prefix, ErrClosed)
	}
	if ctx.Err() == nil && err != nil {
		return opError(op, prefix, err)
	}
	return err
}

// followable returns the client Follow can follow through, or why not.
func (s *Store) followable() (*goredis.Client, error) {
	if s.staleness > 0 {
		return nil, fmt.Errorf("%w: the store reads from replicas (WithReplicaReads), so a key read after its invalidation may be older than the write that invalidated it",
			errors.ErrUnsupported)
	}
	switch c := s.c.(type) {
	case *goredis.Client:
		if c.Options().Addr == "FailoverClient" {
			return nil, fmt.Errorf("%w with a failover (Sentinel) client: its connections may stay on a demoted master that has not seen the new master's writes, and a PING there would vouch for them",
				errors.ErrUnsupported)
		}
		return c, nil
	case *goredis.ClusterClient:
		return nil, fmt.Errorf("%w on a Cluster: Redis tracks keys per node, and this adapter does not follow every master and the slots moving between them",
			errors.ErrUnsupported)
	}
	return nil, fmt.Errorf("%w with a %T: follow needs a *redis.Client of one server", errors.ErrUnsupported, s.c)
}

// startFollow registers a running Follow that Close cancels and waits for
// until stop; false once the Store is closed.
func (s *Store) startFollow(cancel context.CancelFunc) (stop func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil, false
	}
	if s.cancels == nil {
		s.cancels = map[*context.CancelFunc]struct{}{}
	}
	key := &cancel
	s.cancels[key] = struct{}{}
	s.follows.Add(1)
	return func() {
		s.mu.Lock()
		delete(s.cancels, key)
		s.mu.Unlock()
		s.follows.Done()
	}, true
}

// stopFollows cancels every running Follow and waits until each has
// closed its connections.
func (s *Store) stopFollows() {
	s.mu.Lock()
	for c := range s.cancels {
		(*c)()
	}
	s.cancels = nil
	s.mu.Unlock()
	s.follows.Wait()
}

// follower is one Follow call. Its connections come from fc, a client of
// its own with the Store's client's options but RESP2 (Redis sends a RESP3
// connection its invalidations as push frames, which go-redis' PubSub does
// not read; a RESP2 connection subscribed to __redis__:invalidate receives
// them as messages, in the same stream as its PINGs' answers).
type follower struct {
	s      *Store
	fc     *goredis.Client
	prefix string
	hb     time.Duration
	fn     func(driver.Change)
	// want asks for a beat (FollowDemand); nil: beat every heartbeat/2.
	want <-chan struct{}
	// track: the next connection fc makes is the subscriber's, and turns
	// its own tracking on as it connects (OnConnect).
	track atomic.Bool

	// connects counts the connections fc has made and lastID is the
	// client id of the newest: a session knows its two, and any other
	// (a reconnection) breaks it.
	mu       sync.Mutex
	connects int
	lastID   int64
}

// options derives fc's options from the Store's client's: the same server,
// credentials, TLS, database and dialer; RESP2; no retries (a command
// resent on a new connection would hide that the old one, and the tracking
// on it, is gone); nothing of the client-side cache or push notifications,
// which need RESP3 and would enable tracking of their own.
func (f *follower) options(base *goredis.Options) *goredis.Options {
	o := *base
	o.Protocol = 2
	o.MaxRetries = -1
	o.PoolSize, o.MinIdleConns, o.MaxIdleConns, o.MaxActiveConns = 1, 0, 0, 0
	o.ConnMaxIdleTime, o.ConnMaxLifetime, o.ConnMaxLifetimeJitter = -1, 0, 0
	o.PushNotificationProcessor = nil
	o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	o.ClientSideCacheConfig, o.ClientSideCache = nil, nil
	o.ClientSideCacheRefreshOnInvalidate, o.ClientSideCacheCoalesceMisses = false, false
	o.AutoPipelineOptions = nil
	o.Limiter = nil
	if o.ClientName == "" {
		o.ClientName = FollowClientName
	}
	userConnect := base.OnConnect
	o.OnConnect = func(ctx context.Context, cn *goredis.Conn) error {
		if userConnect != nil {
			if err := userConnect(ctx, cn); err != nil {
				return err
			}
		}
		id, err := cn.ClientID(ctx).Result()
		if err != nil {
			return err
		}
		if f.track.CompareAndSwap(true, false) {
			// Tracking on the subscriber itself, redirected to itself:
			// it lasts exactly as long as the connection that receives
			// its invalidations, whose end the subscription sees.
			args := []any{"CLIENT", "TRACKING", "on", "REDIRECT", id, "BCAST"}
			if f.prefix != "" {
				args = append(args, "PREFIX", f.prefix)
			}
			if err := cn.Do(ctx, args...).Err(); err != nil {
				return fmt.Errorf("client tracking: %w", err)
			}
		}
		f.mu.Lock()
		f.connects++
		f.lastID = id
		f.mu.Unlock()
		return nil
	}
	return &o
}

func (f *follower) conns() (int, int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.connects, f.lastID
}

// Bounds of the pause between resynchronisations.
const (
	minResyncBackoff = 10 * time.Millisecond
	maxResyncBackoff = time.Second
)

// maxRefusedSessions bounds the sessions in a row the server refuses with
// NOPERM: an ACL that denies the feed a command, its channel or a key under
// the prefix is not lifted by trying again, and a feed that retried for
// ever would only ever say Lost. Retrying a few times lets an ACL change
// that an operator makes while the feed runs land between sessions.
const maxRefusedSessions = 5

// run follows until ctx ends: sessions one after another, a Lost between
// them. It returns the first session's error when that failed before its
// Reset, and an error saying so when maxRefusedSessions sessions in a row
// were refused with NOPERM.
func (f *follower) run(ctx context.Context) error {
	backoff := adapter.Backoff{Min: minResyncBackoff, Max: maxResyncBackoff}
	started := false
	refused := 0
	for {
		reset, err := f.session(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !started && !reset {
			return err
		}
		started = true
		if goredis.HasErrorPrefix(err, "NOPERM") {
			refused++
		} else {
			refused = 0
		}
		if refused >= maxRefusedSessions {
			if reset {
				f.fn(driver.Change{Kind: driver.ChangeLost, Err: err})
			}
			return fmt.Errorf("the server refused %d sessions of the feed in a row (NOPERM): its ACL user may not run a command, use the channel or read a key the feed needs: grant it the keys under the prefix (~PREFIX*), the channel &__redis__:invalidate and the commands docs/security.md lists: %w", refused, err)
		}
		if reset {
			// This session delivered a Reset: what it delivered may have
			// missed a change from here on. A session that failed before
			// its Reset follows a Lost already sent.
			f.fn(driver.Change{Kind: driver.ChangeLost, Err: err})
			backoff.Reset()
		}
		if err := backoff.Wait(ctx); err != nil {
			return err
		}
	}
}

// callTimeout bounds each command of a session: a server that does not
// answer within it breaks the feed.
func (f *follower) callTimeout() time.Duration { return max(2*f.hb, time.Second) }

// received is what the reader goroutine passes on: a message or the
// error that ended the subscription.
type received struct {
	msg any
	err error
}

// session subscribes, enables tracking, delivers Reset and the snapshot,
// then invalidations and Synced heartbeats until the feed breaks (the
// error says how) or ctx ends. reset says whether it delivered a Reset.
func (f *follower) session(ctx context.Context) (reset bool, err error) {
	// The subscriber first: tracking redirects to its client id.
	n0, _ := f.conns()
	f.track.Store(true)
	defer f.track.Store(false)
	ps := f.fc.Subscribe(ctx)
	defer ps.Close()
	cctx, cancel := context.WithTimeout(ctx, f.callTimeout())
	defer cancel()
	if err := ps.Subscribe(cctx, invalidateChannel); err != nil {
		return false, fmt.Errorf("subscribe to %s: %w", invalidateChannel, err)
	}
	msg, err := ps.Receive(cctx)
	if err != nil {
		return false, fmt.Errorf("subscribe to %s: %w", invalidateChannel, err)
	}
	if sub, ok := msg.(*goredis.Subscription); !ok || sub.Kind != "subscribe" {
		return false, fmt.Errorf("subscribe to %s: unexpected answer %v", invalidateChannel, msg)
	}
	n1, sid := f.conns()
	if n1 != n0+1 {
		return false, fmt.Errorf("subscribe: %d connections made, want 1", n1-n0)
	}

	cancel()
	// tc marks and checks the database (wipe.go); the tracking is the
	// subscriber's.
	tc := f.fc.EphemeralConn()
	defer tc.Close()

	// The reader passes the subscription's messages on through a bounded
	// channel: when the session falls behind, Redis holds the rest in the
	// connection's output buffer (and drops the connection past its
	// client-output-buffer-limit, which ends the session).
	ch := make(chan received, 64)
	done := make(chan struct{})
	var wg sync.WaitGroup
	var lastPong atomic.Uint64 // the token of the newest PING answered
	wg.Go(func() {
		for {
			msg, err := ps.Receive(ctx)
			if p, ok := msg.(*goredis.Pong); ok {
				if tok, perr := strconv.ParseUint(p.Payload, 10, 64); perr == nil {
					lastPong.Store(tok)
				}
			}
			select {
			case ch <- received{msg, err}:
			case <-done:
				return
			}
			if err != nil {
				return
			}
		}
	})
	defer func() {
		_ = ps.Close() // ends a Receive that is waiting
		close(done)
		wg.Wait()
	}()

	// Tracking is on: every write from here on is invalidated, so a
	// snapshot read after this point, then the invalidations, miss none.
	f.fn(driver.Change{Kind: driver.ChangeReset})
	marker, err := f.markDB(ctx, tc)
	if err != nil {
		return true, err
	}
	defer unmarkDB(ctx, tc, marker)
	n2, _ := f.conns()
	if n2 != n1+1 {
		return true, fmt.Errorf("mark the database: %d connections made, want 1", n2-n1)
	}
	if err := f.snapshot(ctx); err != nil {
		return true, err
	}

	var (
		token   uint64    // the newest PING's
		pending bool      // a PING awaits its answer
		sentAt  time.Time // when it was sent
	)
	ping := func() error {
		token++
		sentAt, pending = time.Now(), true
		pctx, cancel := context.WithTimeout(ctx, f.callTimeout())
		defer cancel()
		if err := ps.Ping(pctx, strconv.FormatUint(token, 10)); err != nil {
			return fmt.Errorf("ping the subscriber: %w", err)
		}
		// While the PING's answer travels: a swap before it was sent
		// shows here, before its Synced.
		return f.checkDB(ctx, tc, marker)
	}
	if err := ping(); err != nil {
		return true, err
	}
	b := newBeats(f, f.fc.Options().DB, sid, marker, tc)
	tick := time.NewTicker(max(f.hb/2, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case now := <-tick.C:
			if pending {
				if lastPong.Load() < token && now.Sub(sentAt) > f.hb {
					return true, fmt.Errorf("no answer to a PING within the heartbeat (%v)", f.hb)
				}
				continue
			}
			if f.want != nil {
				if err := b.overdue(ctx, now); err != nil {
					return true, err
				}
				continue
			}
			if err := ping(); err != nil {
				return true, err
			}
		case <-f.want:
			if pending || !b.Due(time.Now()) {
				continue
			}
			usePing, err := b.send(ctx)
			if err != nil {
				return true, err
			}
			if usePing {
				if err := ping(); err != nil {
					return true, err
				}
			}
		case r := <-ch:
			if r.err != nil {
				return true, fmt.Errorf("invalidation stream: %w", r.err)
			}
			switch m := r.msg.(type) {
			case *goredis.Message:
				if m.Channel != invalidateChannel {
					return true, fmt.Errorf("unexpected message on %s", m.Channel)
				}
				if m.PayloadSlice == nil && strings.HasPrefix(m.Payload, beatPrefix) {
					at, ok, err := b.received(ctx, m.Payload, n2)
					if err != nil {
						return true, err
					}
					if ok && f.want != nil {
						f.fn(driver.Change{Kind: driver.ChangeSynced, At: at})
					}
					continue
				}
				keys := m.PayloadSlice
				if keys == nil {
					keys = []string{m.Payload}
				}
				if err := f.invalidated(keys); err != nil {
					return true, err
				}
			case *goredis.Pong:
				if !pending || m.Payload != strconv.FormatUint(token, 10) {
					return true, fmt.Errorf("unexpected PING answer %q", m.Payload)
				}
				// Every invalidation Redis queued before it answered this
				// PING came before the answer and has been delivered; the
				// tracking must still be on, on the connections this
				// session made, for that to mean every write before the
				// PING was sent.
				if err := f.checkConns(n2); err != nil {
					return true, err
				}
				pending = false
				b.Synced(sentAt)
				f.fn(driver.Change{Kind: driver.ChangeSynced, At: sentAt})
			default:
				return true, fmt.Errorf("unexpected message %v", m)
			}
		}
	}
}

// checkConns confirms that fc has made no connection since the session's
// (a reconnection would carry no tracking): the tracking lives on the
// subscriber, and lasts as long as it does.
func (f *follower) checkConns(conns int) error {
	if n, _ := f.conns(); n != conns {
		return errors.New("a follow connection was re-established")
	}
	return nil
}

// snapshot delivers a Put for every key under the prefix that Get reads as
// a value: SCAN, then Get each key.
func (f *follower) snapshot(ctx context.Context) error {
	match := globEscape(f.prefix) + "*"
	var cursor uint64
	for {
		cctx, cancel := context.WithTimeout(ctx, f.callTimeout())
		keys, next, err := f.s.c.Scan(cctx, cursor, match, 256).Result()
		cancel()
		if err != nil {
			return fmt.Errorf("snapshot: scan: %w", err)
		}
		if err := f.read(ctx, keys); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// invalidated delivers a Stale for each invalidated key: Redis names the
// keys a write changed, not their values, and a follower reads a key when
// it needs it rather than every follower reading every change. Redis sends
// an invalidation after the write has been applied, so a read after the
// Stale sees it.
func (f *follower) invalidated(keys []string) error {
	for _, k := range keys {
		if k == "" || !strings.HasPrefix(k, f.prefix) {
			return fmt.Errorf("an invalidation of %q, outside the prefix %q", k, f.prefix)
		}
	}
	for _, k := range keys {
		if isMarker(k) {
			continue // another follower's check of its marker
		}
		f.fn(driver.Change{Kind: driver.ChangeStale, Key: k})
	}
	return nil
}

// read delivers a Put for each of keys that Get reads as a value.
func (f *follower) read(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if isMarker(k) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, f.callTimeout())
		v, ver, err := f.s.Get(cctx, k)
		cancel()
		switch {
		case errors.Is(err, driver.ErrNotFound):
		case err != nil:
			return fmt.Errorf("read %s: %w", k, err)
		default:
			f.fn(driver.Change{Kind: driver.ChangePut, Key: k, Value: v, Version: ver})
		}
	}
	return nil
}
