package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

var _ driver.Follower = (*Store)(nil)

// minLostAfter is the least time a heartbeat may take to come back before
// the feed is declared lost: a loaded server or machine delays one by tens
// of milliseconds, and a false Lost costs every follower a snapshot.
const minLostAfter = time.Second

// Backoff between attempts to resynchronise while the server cannot be
// followed (refused, restarting).
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// maxBatch bounds how many queued notifications are taken at once.
const maxBatch = 256

// Follow implements driver.Follower with LISTEN/NOTIFY (see "Following" in
// the package doc). It returns ctx's error once ctx ends; an error
// matching errors.ErrUnsupported when the table has no trigger (it says
// what to run); and the server's error when it refuses to follow at all (no
// table, no privilege, a prefix that is not UTF-8). A connection that
// breaks, a server that stops answering or restarts, a missed heartbeat
// and a TRUNCATE are reported as driver.ChangeLost and followed by a
// resynchronisation, retried with a backoff up to 2 s for as long as ctx
// lasts.
func (s *Store) Follow(ctx context.Context, prefix string, heartbeat time.Duration, fn func(driver.Change)) error {
	return s.follow(ctx, prefix, heartbeat, false, nil, fn)
}

// FollowDemand implements driver.DemandFollower: Follow, but after each
// session's snapshot it beats only when want asks and its newest Synced is
// older than heartbeat, and the beat is a notification on the table's
// channel, dated by the server, that every follower of the table receives
// (see "Following" in the package doc).
func (s *Store) FollowDemand(ctx context.Context, prefix string, heartbeat time.Duration, want <-chan struct{}, fn func(driver.Change)) error {
	return s.follow(ctx, prefix, heartbeat, true, want, fn)
}

func (s *Store) follow(ctx context.Context, prefix string, heartbeat time.Duration, demand bool, want <-chan struct{}, fn func(driver.Change)) error {
	if err := s.gate().Follow(prefix, heartbeat, demand, want, fn); err != nil {
		return err
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	f := &follower{
		s: s, prefix: prefix, heartbeat: heartbeat, fn: fn, want: want,
		lostAfter: max(2*heartbeat, minLostAfter),
		id:        hex.EncodeToString(id[:]),
	}
	f.beats = "kvbreaker_hb_" + f.id
	f.prepare()
	backoff := adapter.Backoff{Min: minBackoff, Max: maxBackoff}
	for {
		err := f.session(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if refused(err) {
			return s.wrap(adapter.OpFollow, prefix, err)
		}
		if f.wasSynced {
			backoff.Reset()
		}
		if !f.lost { // once per outage: the caller knows until the next Reset
			f.emit(driver.Change{Kind: driver.ChangeLost, Err: s.wrap(adapter.OpFollow, prefix, err)})
		}
		if err := backoff.Wait(ctx); err != nil {
			return err
		}
	}
}

// refused reports whether err means the server will not follow however
// often it is asked: the table lacks the trigger or does not exist, a
// privilege is missing, the prefix is not text.
func refused(err error) bool {
	if errors.Is(err, errors.ErrUnsupported) {
		return true
	}
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok && len(pe.Code) == 5 {
		switch pe.Code[:2] {
		case "42", // syntax error or access rule violation (no table, no privilege)
			"28", // invalid authorization
			"3D", // no such database
			"22": // data exception (a prefix that is not UTF-8)
			return true
		}
	}
	return false
}

// follower is one Follow call's state.
type follower struct {
	s         *Store
	prefix    string
	heartbeat time.Duration
	lostAfter time.Duration
	fn        func(driver.Change)
	beats     string // this follower's heartbeat channel
	seq       uint64
	// want asks for a beat (FollowDemand); nil: beat every heartbeat.
	want <-chan struct{}
	// id names this follower in the beats it sends on demand.
	id string
	// syncedAt is the At of the last Synced sent.
	syncedAt time.Time

	lost      bool // Lost was sent and no Reset since
	wasSynced bool // the last session sent Synced

	sqlTrigger, sqlSnapshot string
	snapshotArgs            []any
}

func (f *follower) prepare() {
	t := quoteIdent(f.s.table)
	cols := fmt.Sprintf("SELECT key, value, version, %s FROM %s AS t", foreignOf("t"), t)
	f.sqlTrigger = `SELECT to_regclass($1) IS NOT NULL,
	(SELECT count(*) FROM pg_trigger WHERE tgrelid = to_regclass($1) AND tgname IN ($2, $3) AND tgenabled <> 'D')`
	// The snapshot reads what Get reads: live rows by the server's now(),
	// tombstones (expired at -infinity) hidden.
	if end, ok := prefixEnd(f.prefix); ok {
		f.sqlSnapshot = cols + ` WHERE key >= $1::text AND key < $2::text AND expires_at > now()`
		f.snapshotArgs = []any{f.prefix, end}
	} else {
		f.sqlSnapshot = cols + ` WHERE key >= $1::text AND expires_at > now()`
		f.snapshotArgs = []any{f.prefix}
	}
}

func (f *follower) emit(c driver.Change) {
	switch c.Kind {
	case driver.ChangeReset:
		f.lost = false
	case driver.ChangeSynced:
		f.wasSynced = true
		f.syncedAt = c.At
	case driver.ChangeLost:
		f.lost = true
	}
	f.fn(c)
}

// errTruncated is a TRUNCATE of the table, which its row triggers do not
// see: the follower resynchronises.
var errTruncated = errors.New("the table was truncated")

// session takes a connection out of the pool, LISTENs, sends the snapshot
// and then the changes until the connection or a heartbeat fails, or ctx
// ends. It returns why it ended; the connection is closed.
func (f *follower) session(ctx context.Context) error {
	f.wasSynced = false
	syncCtx, cancel := context.WithTimeout(ctx, f.s.o.callTimeout)
	defer cancel()
	pc, err := f.s.pool.Acquire(syncCtx)
	if err != nil {
		return err
	}
	// Hijacked, the connection is ours to close and the pool opens
	// another in its place; it was made with the pool's hooks
	// (AfterConnect), so it sees the tables the store's calls see.
	conn := pc.Hijack()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if err := f.sync(syncCtx, conn); err != nil {
		return err
	}
	cancel()
	return f.stream(ctx, conn)
}

// sync checks the trigger, LISTENs on the table's channel and this
// follower's heartbeat channel, and sends Reset, the snapshot and Synced.
func (f *follower) sync(ctx context.Context, conn *pgx.Conn) error {
	table := f.s.table
	var exists bool
	var triggers int
	if err := conn.QueryRow(ctx, f.sqlTrigger, quoteIdent(table), table+notifySuffix, table+truncateSuffix).Scan(&exists, &triggers); err != nil {
		return err
	}
	if !exists || triggers != 2 {
		what := "has no enabled triggers " + table + notifySuffix + " and " + table + truncateSuffix
		if !exists {
			what = "does not exist"
		}
		return fmt.Errorf("%w: table %s %s, which Follow needs: run \"kvbreaker init --backend postgres --postgres-table %s\" (or postgres.CreateTable, or the SQL of \"kvbreaker init --print\" and postgres.Schema) as the table's owner",
			errors.ErrUnsupported, table, what, table)
	}
	// The name shows in pg_stat_activity, for an operator (and a test)
	// to tell the follower's backend from the store's.
	if _, err := conn.Exec(ctx, "SELECT set_config('application_name', $1, false)", appName(conn, table)); err != nil {
		return err
	}
	// LISTEN takes effect when it commits, before the snapshot begins:
	// a change committed after the snapshot's start is notified, one
	// committed before is in it (one committed between is in both: its
	// Stale follows the snapshot's Put).
	if _, err := conn.Exec(ctx, "LISTEN "+quoteIdent(Channel(table))+"; LISTEN "+quoteIdent(f.beats)); err != nil {
		return err
	}
	at := time.Now()
	rows, err := conn.Query(ctx, f.sqlSnapshot, f.snapshotArgs...)
	if err != nil {
		return err
	}
	defer rows.Close()
	f.emit(driver.Change{Kind: driver.ChangeReset})
	for rows.Next() {
		c, err := scanPut(rows)
		if err != nil {
			return err
		}
		f.emit(c)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// Every commit before at is in the snapshot.
	f.emit(driver.Change{Kind: driver.ChangeSynced, At: at})
	return nil
}

// appName is what the follower's connection is named in pg_stat_activity:
// "kvbreaker follow <table>", after the pool's own application_name if it
// has one (the server cuts it to 63 bytes).
func appName(conn *pgx.Conn, table string) string {
	name := "kvbreaker follow " + table
	if own := conn.Config().RuntimeParams["application_name"]; own != "" {
		name = own + ": " + name
	}
	return name
}

func scanPut(rows pgx.Rows) (driver.Change, error) {
	var (
		key         string
		value       []byte
		ver, hashed int64
	)
	if err := rows.Scan(&key, &value, &ver, &hashed); err != nil {
		return driver.Change{}, err
	}
	if value == nil {
		value = []byte{}
	}
	return driver.Change{Kind: driver.ChangePut, Key: key, Value: value, Version: adapter.RowVersion(ver, hashed)}, nil
}

// beat is a heartbeat sent and not yet back.
type beat struct {
	payload string
	sent    time.Time
}

// stream turns notifications into changes until the connection fails, a
// heartbeat is missed, or ctx ends.
func (f *follower) stream(ctx context.Context, conn *pgx.Conn) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel: deferred calls run last-in first-out
	defer cancel()

	notes := make(chan *pgconn.Notification, maxBatch)
	readErr := make(chan error, 1)
	wg.Go(func() {
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				readErr <- err
				return
			}
			select {
			case notes <- n:
			case <-ctx.Done():
				return
			}
		}
	})

	// On demand, the ticker only notices a beat of the follower's own
	// that did not come back; it sends nothing.
	tick := time.NewTicker(f.heartbeat)
	defer tick.Stop()
	var d *demand
	if f.want != nil {
		d = newDemand(f)
	}
	var (
		pending  []beat // heartbeats sent, oldest first
		sending  bool
		sent     = make(chan error, 1)
		sendErr  error
		channel  = Channel(f.s.table)
		pgNotify = "SELECT pg_notify($1, $2)"
	)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-readErr:
			return fmt.Errorf("the listening connection failed: %w", err)
		case err := <-sent:
			sending = false
			sendErr = err
		case now := <-tick.C:
			if d != nil {
				if err := d.overdue(now); err != nil {
					if sendErr != nil {
						return fmt.Errorf("%w (last send: %w)", err, sendErr)
					}
					return err
				}
				continue
			}
			if len(pending) > 0 && now.Sub(pending[0].sent) > f.lostAfter {
				msg := fmt.Sprintf("no heartbeat back within %v", f.lostAfter)
				if sendErr != nil {
					return fmt.Errorf("%s (last send: %w)", msg, sendErr)
				}
				return errors.New(msg)
			}
			if sending {
				continue
			}
			f.seq++
			b := beat{payload: strconv.FormatUint(f.seq, 10), sent: time.Now()}
			pending = append(pending, b)
			sending = true
			wg.Go(func() {
				// From another connection: the heartbeat comes back
				// after every notification of a transaction that
				// committed before it was sent.
				sctx, cancel := context.WithTimeout(ctx, f.lostAfter)
				defer cancel()
				_, err := f.s.pool.Exec(sctx, pgNotify, f.beats, b.payload)
				sent <- err
			})
		case <-f.want:
			// A nil channel (Follow) never receives.
			now := time.Now()
			if sending || !d.Due(now) {
				continue
			}
			payload := d.start(now)
			sending = true
			wg.Go(func() {
				sctx, cancel := context.WithTimeout(ctx, f.lostAfter)
				defer cancel()
				_, err := f.s.pool.Exec(sctx, sqlBeat, channel, payload)
				sent <- err
			})
		case n := <-notes:
			batch := []*pgconn.Notification{n}
		drain:
			for len(batch) < maxBatch {
				select {
				case n := <-notes:
					batch = append(batch, n)
				default:
					break drain
				}
			}
			var keys []string
			for _, n := range batch {
				switch {
				case n.Channel == f.beats:
					i := 0
					for i < len(pending) && pending[i].payload != n.Payload {
						i++
					}
					if i == len(pending) {
						continue // sent before this session's LISTEN
					}
					f.stale(keys)
					keys = keys[:0]
					f.emit(driver.Change{Kind: driver.ChangeSynced, At: pending[i].sent})
					pending = pending[i+1:]
				case n.Channel != channel:
				case strings.HasPrefix(n.Payload, beatPrefix):
					if d == nil {
						continue // a follower on demand's: this one beats on its own
					}
					at, ok, err := d.received(ctx, n.Payload[len(beatPrefix):], time.Now())
					if err != nil {
						return err
					}
					if ok {
						f.stale(keys)
						keys = keys[:0]
						f.emit(driver.Change{Kind: driver.ChangeSynced, At: at})
					}
				case n.Payload == "*":
					return errTruncated
				case strings.HasPrefix(n.Payload, "k"):
					if key := n.Payload[1:]; strings.HasPrefix(key, f.prefix) {
						keys = append(keys, key)
					}
				case strings.HasPrefix(n.Payload, "~"):
					// A key too long to notify whole: only its start
					// is known.
					if start := n.Payload[1:]; strings.HasPrefix(start, f.prefix) || strings.HasPrefix(f.prefix, start) {
						return fmt.Errorf("a key of more than %d bytes that may begin with the prefix changed", maxNotifyKey)
					}
				}
			}
			f.stale(keys)
		}
	}
}

// stale delivers a Stale for each notified key, once per key of a batch,
// in the order they were first notified: the notification names the key,
// not its row, and a follower reads a key when it needs it rather than
// every follower reading every change. A notification arrives after its
// transaction committed, so a read after the Stale sees that commit.
func (f *follower) stale(keys []string) {
	for i, k := range keys {
		if !slices.Contains(keys[:i], k) {
			f.emit(driver.Change{Kind: driver.ChangeStale, Key: k})
		}
	}
}
