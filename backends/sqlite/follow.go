package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

var _ driver.Follower = (*Store)(nil)

// DefaultFollowPoll is how often Follow reads the file by default.
const DefaultFollowPoll = 50 * time.Millisecond

// Follow implements driver.Follower by polling the file: SQLite has no way
// to tell another process that a transaction committed, so a follower
// reads, every WithFollowPoll (or every heartbeat, if shorter), the rows
// whose version is above the counter it read last (an index range, empty
// when nothing was written). Versions are given in commit order (writes
// are serial and each takes the counter's next), so a read sees every
// commit before it began and none after, and the changes of each key in
// order; a key written twice between two reads arrives as one Put of the
// later write.
//
// The snapshot reads the counter and the prefix's live rows in one read
// transaction, then sends Reset, the Puts and Synced at the instant before
// the transaction began. Each later read sends a Put for a live row whose
// version it has not delivered, a Delete for a tombstone or expired row of
// a key it had delivered (a write that had expired before the read saw
// it arrives as its Put and then a Delete), and a Delete for each delivered key whose
// expiry has passed by the store's clock (so an expired record leaves the
// mirror when Get stops finding it, without a write); then Synced at the
// instant before its transaction began, whenever it delivered something
// and otherwise once a heartbeat.
//
// A purge that deleted a row above the counter the follower read last
// (a change it may not have seen: it fell WithPurgeDelay behind), a change
// of the file behind the stores' back (ErrRowsDeleted, ErrFileRestored,
// ErrFileReplaced: wipe.go) and a read that fails are ChangeLost, then a resynchronisation, retried with a
// backoff of 50 ms doubling to 2 s while the file cannot be read. Follow
// returns when its context ends, or at once when its first snapshot fails
// (the file is corrupt, say).
//
// Costs: each follower reads the file every poll (two statements when
// nothing changed); a write reaches a follower at its next poll, so a
// mirror lags the file by up to WithFollowPoll.
func (s *Store) Follow(ctx context.Context, prefix string, heartbeat time.Duration, fn func(driver.Change)) error {
	if err := s.gate().Follow(prefix, heartbeat, false, nil, fn); err != nil {
		return err
	}
	f := &follower{s: s, prefix: prefix, heartbeat: heartbeat, fn: fn, poll: min(s.o.poll, heartbeat)}
	if err := f.snapshot(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &driver.OpError{Backend: "sqlite", Op: adapter.OpFollow, Key: prefix, Err: err}
	}
	tick := time.NewTicker(f.poll)
	defer tick.Stop()
	backoff := adapter.Backoff{Min: 50 * time.Millisecond, Max: 2 * time.Second}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		err := f.read(ctx)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if s.closed.Load() {
			// The database is closed: no resynchronisation can succeed.
			return &driver.OpError{Backend: "sqlite", Op: adapter.OpFollow, Key: prefix, Err: ErrClosed}
		}
		fn(driver.Change{Kind: driver.ChangeLost, Err: err})
		for {
			if err := f.snapshot(ctx); err == nil {
				backoff.Reset()
				break
			}
			if err := backoff.Wait(ctx); err != nil {
				return err
			}
		}
	}
}

type follower struct {
	s         *Store
	prefix    string
	heartbeat time.Duration
	poll      time.Duration
	fn        func(driver.Change)

	last      int64               // the counter as of the last read
	delivered map[string]delivery // live keys as delivered
	synced    time.Time           // when the last Synced was sent
	watch     watch               // what tells a wipe, as of the last read
}

type delivery struct{ version, expiresAt int64 }

// fetched is a row a follower read: its key, its value and what a delivery
// of it records.
type fetched struct {
	key   string
	value []byte
	d     delivery
}

// fetch runs q, a SELECT of key, value, version and expires_at, in tx and
// hands keep each row.
func fetch(ctx context.Context, tx *sql.Tx, keep func(fetched), q string, args ...any) error {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r fetched
		if err := rows.Scan(&r.key, &r.value, &r.d.version, &r.d.expiresAt); err != nil {
			return err
		}
		keep(r)
	}
	return rows.Err()
}

// errPurged is a purge of a change the follower had not read.
var errPurged = errors.New("sqlite: a purge deleted rows written since the follower's last read (it fell behind by more than WithPurgeDelay)")

// snapshot reads the prefix's live rows and the counter in one read
// transaction and sends Reset, a Put per row and Synced.
func (f *follower) snapshot(ctx context.Context) error {
	at := time.Now()
	now := f.s.now()
	var got []fetched
	var last int64
	var w watch
	if err := f.s.replaced(); err != nil {
		return err
	}
	err := f.s.readTx(ctx, func(tx *sql.Tx) error {
		var key sql.NullString
		var version sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT (SELECT value FROM kvbreaker_meta WHERE name = 'version'),
	COALESCE((SELECT value FROM kvbreaker_meta WHERE name = 'deleted'), 0),
	(SELECT key FROM kvbreaker ORDER BY version DESC LIMIT 1), (SELECT max(version) FROM kvbreaker)`).Scan(&last, &w.deleted, &key, &version); err != nil {
			return err
		}
		w.witness = witness{key.String, version.Int64}
		q, args := "SELECT key, value, version, expires_at FROM kvbreaker WHERE key >= ?1 AND expires_at > ?2", []any{f.prefix, now}
		if end, ok := adapter.PrefixEnd(f.prefix); ok {
			q, args = q+" AND key < ?3", append(args, end)
		}
		return fetch(ctx, tx, func(r fetched) { got = append(got, r) }, q+" ORDER BY key", args...)
	})
	if err != nil {
		return f.s.cause(ctx, err)
	}
	f.last, f.watch = last, w
	f.delivered = make(map[string]delivery, len(got))
	f.fn(driver.Change{Kind: driver.ChangeReset})
	for _, r := range got {
		f.delivered[r.key] = r.d
		f.fn(driver.Change{Kind: driver.ChangePut, Key: r.key, Value: nonNil(r.value), Version: driver.Version(r.d.version)})
	}
	f.sync(at)
	return nil
}

// read sends what changed since the last read, and Synced when due.
func (f *follower) read(ctx context.Context) error {
	at := time.Now()
	var got []fetched
	var last, purged, deleted int64
	var cur sql.NullInt64
	top := f.watch.witness
	if err := f.s.replaced(); err != nil {
		return err
	}
	err := f.s.readTx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT (SELECT value FROM kvbreaker_meta WHERE name = 'version'), (SELECT value FROM kvbreaker_meta WHERE name = 'purged'),
	COALESCE((SELECT value FROM kvbreaker_meta WHERE name = 'deleted'), 0), (SELECT version FROM kvbreaker WHERE key = ?)`, top.key).Scan(&last, &purged, &deleted, &cur); err != nil {
			return err
		}
		if last == f.last {
			return nil
		}
		return fetch(ctx, tx, func(c fetched) {
			top = witness{c.key, c.d.version}
			if strings.HasPrefix(c.key, f.prefix) {
				got = append(got, c)
			}
		}, "SELECT key, value, version, expires_at FROM kvbreaker WHERE version > ? ORDER BY version", f.last)
	})
	if err != nil {
		return f.s.cause(ctx, err)
	}
	if purged > f.last {
		return errPurged
	}
	if err := f.check(deleted, last, purged, cur); err != nil {
		return err
	}
	f.watch.witness = top
	// Expiry is judged after the read, by a clock reading no earlier than
	// any Get that could still have found the key.
	now := f.s.now()
	sent := false
	for _, c := range got {
		prev, had := f.delivered[c.key]
		switch {
		case c.d.expiresAt > now:
			if !had || prev.version != c.d.version {
				f.delivered[c.key] = c.d
				f.fn(driver.Change{Kind: driver.ChangePut, Key: c.key, Value: nonNil(c.value), Version: driver.Version(c.d.version)})
				sent = true
			}
		case c.d.expiresAt != tombstone && (!had || prev.version != c.d.version):
			// A write that expired before this read saw it: its Put,
			// then its expiry.
			delete(f.delivered, c.key)
			f.fn(driver.Change{Kind: driver.ChangePut, Key: c.key, Value: nonNil(c.value), Version: driver.Version(c.d.version)})
			f.fn(driver.Change{Kind: driver.ChangeDelete, Key: c.key, Version: driver.Version(c.d.version)})
			sent = true
		case had:
			delete(f.delivered, c.key)
			f.fn(driver.Change{Kind: driver.ChangeDelete, Key: c.key})
			sent = true
		}
	}
	for k, d := range f.delivered {
		if d.expiresAt <= now {
			delete(f.delivered, k)
			f.fn(driver.Change{Kind: driver.ChangeDelete, Key: k, Version: driver.Version(d.version)})
			sent = true
		}
	}
	f.last = last
	// Synced once a heartbeat: a poll that falls a little short of it
	// (the ticker's phase) counts, so that the gaps average the heartbeat.
	if sent || time.Since(f.synced) >= f.heartbeat-f.poll/2 {
		f.sync(at)
	}
	return nil
}

func (f *follower) sync(at time.Time) {
	f.synced = time.Now()
	f.fn(driver.Change{Kind: driver.ChangeSynced, At: at})
}

// readTx runs read in one deferred read transaction: one snapshot of the
// file, which waits for no writer.
func (s *Store) readTx(ctx context.Context, read func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true}) // plain BEGIN: deferred
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a read-only transaction has nothing to keep
	if err := read(tx); err != nil {
		return err
	}
	return tx.Commit()
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
