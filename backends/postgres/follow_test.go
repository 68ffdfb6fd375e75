package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/driver"
)

// event is a change as a test's fn received it, and when.
type event struct {
	driver.Change
	arrived time.Time
}

// feed records what a Follow call delivers.
type feed struct {
	mu     sync.Mutex
	events []event
	wake   chan struct{}
	// onLost, if set, runs in fn on each Lost, on Follow's goroutine:
	// what it writes commits before the resynchronisation starts.
	onLost func()
	// store resolves the keys the feed said are stale, as a Breaker's
	// mirror does when it next needs them (set by follow).
	store driver.Store
}

func (f *feed) fn(c driver.Change) {
	now := time.Now()
	if c.Kind == driver.ChangeLost && f.onLost != nil {
		f.onLost()
	}
	f.mu.Lock()
	f.events = append(f.events, event{c, now})
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *feed) snapshot() []event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

// waitFor waits (up to 20 s) until ok holds for the events so far and
// returns them.
func (f *feed) waitFor(t *testing.T, what string, ok func([]event) bool) []event {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		ev := f.snapshot()
		if ok(ev) {
			return ev
		}
		select {
		case <-f.wake:
		case <-deadline.C:
			t.Fatalf("no %s within 20 s; got:\n%s", what, dump(ev))
		}
	}
}

func dump(ev []event) string {
	var b strings.Builder
	for _, e := range ev {
		fmt.Fprintf(&b, "  %v %q v%d %v\n", e.Kind, e.Key, e.Version, e.Err)
	}
	return b.String()
}

// staleVersion marks, in what mirror returns, a key the feed said is
// stale.
const staleVersion = ^driver.Version(0)

// mirror is the state the events leave: the keys of the last Reset's
// snapshot and what followed (staleVersion for a Stale), whether a Synced
// came after that Reset and no Lost since, and the last Synced's At.
func mirror(ev []event) (m map[string]driver.Version, healthy bool, at time.Time) {
	m = map[string]driver.Version{}
	for _, e := range ev {
		switch e.Kind {
		case driver.ChangeReset:
			clear(m)
			healthy = false
		case driver.ChangePut:
			m[e.Key] = e.Version
		case driver.ChangeDelete:
			delete(m, e.Key)
		case driver.ChangeStale:
			m[e.Key] = staleVersion
		case driver.ChangeSynced:
			healthy, at = true, e.At
		case driver.ChangeLost:
			healthy = false
		}
	}
	return m, healthy, at
}

// syncedSince waits until the feed is healthy with a Synced whose At is
// after t (every commit before t has been delivered), and returns the
// mirror then, each stale key read from the store.
func (f *feed) syncedSince(tt *testing.T, t time.Time) map[string]driver.Version {
	tt.Helper()
	var m map[string]driver.Version
	f.waitFor(tt, "Synced after "+t.Format(time.StampMicro), func(ev []event) bool {
		var healthy bool
		var at time.Time
		m, healthy, at = mirror(ev)
		return healthy && at.After(t)
	})
	for k, v := range m {
		if v != staleVersion {
			continue
		}
		_, v, err := f.store.Get(tt.Context(), k)
		switch {
		case errors.Is(err, driver.ErrNotFound):
			delete(m, k)
		case err != nil:
			tt.Fatalf("Get(%q) = %v", k, err)
		default:
			m[k] = v
		}
	}
	return m
}

func count(ev []event, k driver.ChangeKind) int {
	n := 0
	for _, e := range ev {
		if e.Kind == k {
			n++
		}
	}
	return n
}

// follow runs st.Follow in the background until the test ends, and
// checks that it then returns the context's error.
func follow(t *testing.T, st *postgres.Store, prefix string, heartbeat time.Duration, f *feed) {
	t.Helper()
	f.wake = make(chan struct{}, 1)
	f.store = st
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- st.Follow(ctx, prefix, heartbeat, f.fn) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Follow returned %v after its context was cancelled, want context.Canceled", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Follow did not return within 10 s of its context's cancellation")
		}
	})
}

func put(t *testing.T, st driver.Store, key string, old driver.Version, value string, ttl time.Duration) driver.Version {
	t.Helper()
	v, err := st.CompareAndSwap(t.Context(), key, old, []byte(value), ttl)
	if err != nil {
		t.Fatalf("CompareAndSwap(%q) = %v", key, err)
	}
	return v
}

// expireQuietly makes key's row expired for an hour, as the server's clock
// would, without firing the table's triggers (a replica's session does
// not): no notification, as with real expiry.
func expireQuietly(t *testing.T, pool *pgxpool.Pool, key string) {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(t.Context()) //nolint:errcheck // after Commit it does nothing
	if _, err := tx.Exec(t.Context(), "SET LOCAL session_replication_role = replica"); err != nil {
		t.Fatal(err)
	}
	tag, err := tx.Exec(t.Context(), `UPDATE `+table+` SET expires_at = now() - interval '1 hour', purge_at = now() - interval '1 hour' WHERE key = $1`, key)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("expire %q: %v, %v", key, tag, err)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestFollowSnapshotAndChanges: the feed starts with Reset, the prefix's
// live rows (not its tombstones, expired rows or other prefixes' rows) and
// Synced; then a create, a swap and a delete arrive as a Stale each, a
// failed compare-and-swap as nothing; a row that expires by the clock
// stays in the mirror until the purge deletes it, which arrives as Stale.
func TestFollowSnapshotAndChanges(t *testing.T) {
	ctx := t.Context()
	st := newRaw(t, postgres.WithPurgeEvery(0), postgres.WithPurgeDelay(30*time.Minute))
	p := uniquePrefix(t)
	va := put(t, st, p+"a", driver.NoVersion, "a1", time.Hour)
	vb := put(t, st, p+"b", driver.NoVersion, "b1", time.Hour)
	vc := put(t, st, p+"c", driver.NoVersion, "c1", time.Hour)
	if err := st.CompareAndDelete(ctx, p+"c", vc); err != nil {
		t.Fatal(err)
	}
	vd := put(t, st, p+"d", driver.NoVersion, "d1", time.Hour)
	put(t, st, p+"gone", driver.NoVersion, "g1", time.Hour)
	expireQuietly(t, st.Pool(), p+"gone")
	put(t, st, p[:len(p)-1]+"x/a", driver.NoVersion, "other", time.Hour) // another prefix

	f := &feed{}
	follow(t, st, p, 50*time.Millisecond, f)
	ev := f.waitFor(t, "snapshot", func(ev []event) bool { return count(ev, driver.ChangeSynced) > 0 })
	if ev[0].Kind != driver.ChangeReset {
		t.Fatalf("the feed starts with %v, want reset:\n%s", ev[0].Kind, dump(ev))
	}
	snap := ev[1:slices.IndexFunc(ev, func(e event) bool { return e.Kind == driver.ChangeSynced })]
	got := map[string]string{}
	for _, e := range snap {
		if e.Kind != driver.ChangePut {
			t.Fatalf("snapshot holds a %v:\n%s", e.Kind, dump(ev))
		}
		got[e.Key] = fmt.Sprintf("%s v%d", e.Value, e.Version)
	}
	want := map[string]string{p + "a": fmt.Sprintf("a1 v%d", va), p + "b": fmt.Sprintf("b1 v%d", vb), p + "d": fmt.Sprintf("d1 v%d", vd)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("snapshot = %v, want %v", got, want)
	}

	expireQuietly(t, st.Pool(), p+"d") // expires by the clock: no event
	ve := put(t, st, p+"e", driver.NoVersion, "e1", time.Hour)
	va2 := put(t, st, p+"a", va, "a2", time.Hour)
	if _, err := st.CompareAndSwap(ctx, p+"a", va, []byte("stale"), time.Hour); !errors.Is(err, driver.ErrConflict) {
		t.Fatalf("stale CompareAndSwap = %v", err)
	}
	if err := st.CompareAndDelete(ctx, p+"b", vb); err != nil {
		t.Fatal(err)
	}
	put(t, st, p[:len(p)-1]+"x/b", driver.NoVersion, "other", time.Hour)
	wrote := time.Now()
	m := f.syncedSince(t, wrote)
	if want := map[string]driver.Version{p + "a": va2, p + "d": vd, p + "e": ve}; fmt.Sprint(m) != fmt.Sprint(want) {
		t.Fatalf("mirror after the writes = %v, want %v (d expired without an event)", m, want)
	}
	after := f.snapshot()[len(ev):]
	var kinds []string
	for _, e := range after {
		if e.Kind != driver.ChangeSynced {
			kinds = append(kinds, e.Kind.String()+" "+strings.TrimPrefix(e.Key, p))
		}
	}
	if fmt.Sprint(kinds) != "[stale e stale a stale b]" {
		t.Fatalf("changes after the snapshot = %v, want [stale e stale a stale b] (nothing for the failed swap nor the other prefix)\n%s", kinds, dump(after))
	}

	// The purge deletes d (expired an hour ago) and nothing recent.
	n, err := st.Purge(ctx)
	if err != nil || n < 1 {
		t.Fatalf("Purge = %d, %v; want d purged", n, err)
	}
	m = f.syncedSince(t, time.Now())
	if want := map[string]driver.Version{p + "a": va2, p + "e": ve}; fmt.Sprint(m) != fmt.Sprint(want) {
		t.Fatalf("mirror after the purge = %v, want %v (d deleted)", m, want)
	}
	if last := f.snapshot(); count(last, driver.ChangeLost) != 0 {
		t.Fatalf("the feed was lost:\n%s", dump(last))
	}
}

// TestFollowStorm: concurrent compare-and-swaps and deletes on a few keys
// leave the mirror equal to the store once quiet.
func TestFollowStorm(t *testing.T) {
	ctx := t.Context()
	st := newRaw(t)
	p := uniquePrefix(t)
	f := &feed{}
	follow(t, st, p, 20*time.Millisecond, f)
	f.syncedSince(t, time.Time{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 60 {
				k := fmt.Sprintf("%sk%d", p, i%3)
				_, v, err := st.Get(ctx, k)
				if errors.Is(err, driver.ErrNotFound) {
					v = driver.NoVersion
				} else if err != nil {
					t.Error(err)
					return
				}
				if (i+w)%7 == 0 && v != driver.NoVersion {
					_ = st.CompareAndDelete(ctx, k, v)
				} else {
					_, _ = st.CompareAndSwap(ctx, k, v, []byte(fmt.Sprint(w, i)), time.Hour)
				}
			}
		})
	}
	wg.Wait()
	m := f.syncedSince(t, time.Now())
	want := map[string]driver.Version{}
	for i := range 3 {
		k := fmt.Sprintf("%sk%d", p, i)
		if _, v, err := st.Get(ctx, k); err == nil {
			want[k] = v
		}
	}
	if fmt.Sprint(m) != fmt.Sprint(want) {
		t.Fatalf("mirror = %v, store = %v", m, want)
	}
}

// terminate ends, with pg_terminate_backend, the backends of the pool
// named name that follow (see namedPool), and returns how many.
func terminate(ctx context.Context, pool *pgxpool.Pool, name string) (int, error) {
	var n int
	err := pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name LIKE $1 || ': kvbreaker follow %') x`, name).Scan(&n)
	return n, err
}

// TestFollowBackendTerminated: pg_terminate_backend of the listening
// backend is reported as Lost, and the resynchronisation's snapshot holds
// a write made after the Lost and before it.
func TestFollowBackendTerminated(t *testing.T) {
	ctx := t.Context()
	h, err := harnessVia(ctx, nil, server.URL())
	if err != nil {
		t.Fatal(err)
	}
	h.t = t
	t.Cleanup(h.Close) // after Follow has returned (cleanups run last first)
	st := h.store
	p := uniquePrefix(t)
	va := put(t, st, p+"a", driver.NoVersion, "a1", time.Hour)
	var vb atomic.Uint64
	f := &feed{onLost: func() {
		if vb.Load() == 0 {
			vb.Store(uint64(put(t, st, p+"b", driver.NoVersion, "b1", time.Hour)))
		}
	}}
	follow(t, st, p, 50*time.Millisecond, f)
	f.syncedSince(t, time.Time{})
	if err := h.BreakFeed(ctx); err != nil {
		t.Fatalf("BreakFeed = %v", err)
	}
	ev := f.waitFor(t, "Lost, then a resync", func(ev []event) bool {
		i := slices.IndexFunc(ev, func(e event) bool { return e.Kind == driver.ChangeLost })
		return i >= 0 && count(ev[i:], driver.ChangeSynced) > 0
	})
	i := slices.IndexFunc(ev, func(e event) bool { return e.Kind == driver.ChangeLost })
	if ev[i+1].Kind != driver.ChangeReset {
		t.Fatalf("after Lost came %v, want reset:\n%s", ev[i+1].Kind, dump(ev))
	}
	if !strings.Contains(ev[i].Err.Error(), "postgres: follow "+p+": the listening connection failed") {
		t.Errorf("Lost's error = %v", ev[i].Err)
	}
	m, _, _ := mirror(ev)
	want := map[string]driver.Version{p + "a": va, p + "b": driver.Version(vb.Load())}
	if fmt.Sprint(m) != fmt.Sprint(want) {
		t.Fatalf("mirror after the resync = %v, want %v (b written between Lost and the resync)\n%s", m, want, dump(ev))
	}
	// The new connection follows too.
	vc := put(t, st, p+"c", driver.NoVersion, "c1", time.Hour)
	if m := f.syncedSince(t, time.Now()); m[p+"c"] != vc {
		t.Fatalf("mirror after a write on the new connection = %v, want c v%d", m, vc)
	}
}

// TestFollowServerRestart: a server killed and restarted is Lost and then
// resynchronised, with what was written after the restart.
func TestFollowServerRestart(t *testing.T) {
	srv := ownServer(t)
	ctx := t.Context()
	st := mustNew(t, srv.URL())
	p := uniquePrefix(t)
	va := put(t, st, p+"a", driver.NoVersion, "a1", time.Hour)
	f := &feed{}
	follow(t, st, p, 50*time.Millisecond, f)
	f.syncedSince(t, time.Time{})
	srv.Kill()
	f.waitFor(t, "Lost", func(ev []event) bool { return count(ev, driver.ChangeLost) > 0 })
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	vb := put(t, st, p+"b", driver.NoVersion, "b1", time.Hour)
	m := f.syncedSince(t, time.Now())
	if want := map[string]driver.Version{p + "a": va, p + "b": vb}; fmt.Sprint(m) != fmt.Sprint(want) {
		t.Fatalf("mirror after the restart = %v, want %v", m, want)
	}
	lostOncePerOutage(t, f.snapshot())
}

// lostOncePerOutage fails t unless lostProblem finds none, and logs the
// later outages it accepted.
func lostOncePerOutage(t *testing.T, ev []event) {
	t.Helper()
	problem, later := lostProblem(ev)
	for _, err := range later {
		t.Logf("after the resync the feed missed its heartbeat and said Lost again (machine too slow to tell): %v", err)
	}
	if problem != "" {
		t.Errorf("%s:\n%s", problem, dump(ev))
	}
}

// lostProblem: the feed said Lost for the outage, and never again before
// it had resynchronised (a Synced after the Lost). A later Lost is a feed
// that synced and then missed its own heartbeat: on a loaded machine a
// heartbeat's first statement over the pool's new connections can take
// longer than the 1 s it is given, which is another outage as the feed
// sees it, not a second report of this one (returned in later); any other
// is the problem.
func lostProblem(ev []event) (problem string, later []error) {
	lost, synced := 0, false
	for _, e := range ev {
		switch {
		case e.Kind == driver.ChangeSynced:
			synced = true
		case e.Kind != driver.ChangeLost:
		case lost == 0:
			lost, synced = 1, false
		case !synced:
			return "Lost again before a Synced, want once per outage", later
		case e.Err == nil || !strings.Contains(e.Err.Error(), "no heartbeat back within"):
			return fmt.Sprintf("a second Lost after the resync, not a missed heartbeat (%v)", e.Err), later
		default:
			lost, synced = lost+1, false
			later = append(later, e.Err)
		}
	}
	if lost == 0 {
		return "no Lost for the outage", later
	}
	return "", later
}

// TestLostProblem is lostProblem's control: one Lost, or a missed
// heartbeat after a resync, pass; none, a repeat before a Synced, or
// another cause after it, do not.
func TestLostProblem(t *testing.T) {
	lost := func(msg string) event {
		return event{Change: driver.Change{Kind: driver.ChangeLost, Err: errors.New(msg)}}
	}
	synced := event{Change: driver.Change{Kind: driver.ChangeSynced}}
	reset := event{Change: driver.Change{Kind: driver.ChangeReset}}
	broke, beat := lost("the listening connection failed: unexpected EOF"), lost("no heartbeat back within 1s")
	for name, tc := range map[string]struct {
		ev   []event
		pass bool
	}{
		"once":                         {[]event{synced, broke, reset, synced}, true},
		"a missed heartbeat after":     {[]event{synced, broke, reset, synced, beat, reset, synced}, true},
		"none":                         {[]event{synced, reset, synced}, false},
		"twice before a Synced":        {[]event{synced, broke, reset, broke, reset, synced}, false},
		"a heartbeat before a Synced":  {[]event{synced, broke, reset, beat, reset, synced}, false},
		"another cause after a Synced": {[]event{synced, broke, reset, synced, broke, reset, synced}, false},
	} {
		if problem, _ := lostProblem(tc.ev); (problem == "") != tc.pass {
			t.Errorf("%s: lostProblem = %q, want pass %v", name, problem, tc.pass)
		}
	}
}

// TestFollowServerPaused: while the server is stopped (SIGSTOP) no Synced
// claims anything after the pause; a missed heartbeat is reported as
// Lost, and once it resumes the feed resynchronises.
func TestFollowServerPaused(t *testing.T) {
	srv := ownServer(t)
	st := mustNew(t, srv.URL())
	p := uniquePrefix(t)
	va := put(t, st, p+"a", driver.NoVersion, "a1", time.Hour)
	f := &feed{}
	follow(t, st, p, 50*time.Millisecond, f)
	f.syncedSince(t, time.Now()) // a heartbeat has come back
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			_ = srv.Resume()
		}
	}()
	ev := f.waitFor(t, "Lost while paused", func(ev []event) bool { return count(ev, driver.ChangeLost) > 0 })
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	lost := ev[slices.IndexFunc(ev, func(e event) bool { return e.Kind == driver.ChangeLost })]
	// The error names the missed heartbeat; the bound tells it from TCP
	// noticing (minutes) without measuring the machine's load.
	if took := lost.arrived.Sub(paused); took > 15*time.Second {
		t.Errorf("Lost came %v after the pause, want about a second (a missed heartbeat)", took)
	}
	if !strings.Contains(lost.Err.Error(), "no heartbeat back within 1s") {
		t.Errorf("Lost's error = %v, want a missed heartbeat", lost.Err)
	}
	for _, e := range ev {
		if e.Kind == driver.ChangeSynced && !e.At.Before(paused) {
			t.Errorf("a Synced at %v came while the server was paused (at %v)", e.At, paused)
		}
	}
	vb := put(t, st, p+"b", driver.NoVersion, "b1", time.Hour)
	m := f.syncedSince(t, time.Now())
	if want := map[string]driver.Version{p + "a": va, p + "b": vb}; fmt.Sprint(m) != fmt.Sprint(want) {
		t.Fatalf("mirror after the resume = %v, want %v", m, want)
	}
}

// TestFollowLongTableName: a table of the longest name New takes gets a
// channel within PostgreSQL's 63-byte identifiers, which the trigger
// notifies and Follow listens on (LISTEN would cut a longer one, and
// pg_notify refuse it). A TRUNCATE of it, which no row trigger sees, is
// Lost and a resync to the empty table.
func TestFollowLongTableName(t *testing.T) {
	name := strings.Repeat("t", 40) + fmt.Sprintf("_%09d", tableSeq.Add(1))
	if len(name) != 50 {
		t.Fatalf("table name of %d bytes", len(name))
	}
	if c := postgres.Channel(name); len(c) > 63 {
		t.Fatalf("Channel(%q) = %q, %d bytes", name, c, len(c))
	}
	pool := newPool(t, server.URL())
	if err := postgres.CreateTable(t.Context(), pool, name); err != nil {
		t.Fatal(err)
	}
	st, err := postgres.New(pool, name)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f := &feed{}
	follow(t, st, "", 50*time.Millisecond, f)
	f.syncedSince(t, time.Time{})
	v := put(t, st, "a.example", driver.NoVersion, "x", time.Hour)
	if m := f.syncedSince(t, time.Now()); m["a.example"] != v {
		t.Fatalf("mirror = %v, want a.example v%d", m, v)
	}
	if _, err := pool.Exec(t.Context(), "TRUNCATE "+name); err != nil {
		t.Fatal(err)
	}
	ev := f.waitFor(t, "Lost, then a resync", func(ev []event) bool {
		i := slices.IndexFunc(ev, func(e event) bool { return e.Kind == driver.ChangeLost })
		return i >= 0 && count(ev[i:], driver.ChangeSynced) > 0
	})
	if m, _, _ := mirror(ev); len(m) != 0 {
		t.Fatalf("mirror after the TRUNCATE = %v, want empty\n%s", m, dump(ev))
	}
	if lost := ev[slices.IndexFunc(ev, func(e event) bool { return e.Kind == driver.ChangeLost })]; !strings.Contains(lost.Err.Error(), "truncated") {
		t.Errorf("Lost's error = %v", lost.Err)
	}
}

// TestFollowWithoutTrigger: on a table made without the trigger (by an
// earlier version's CreateTable), Follow refuses at once with
// errors.ErrUnsupported and says what to run; CreateTable then adds the
// trigger to the existing table, and Follow works.
func TestFollowWithoutTrigger(t *testing.T) {
	ctx := t.Context()
	pool := newPool(t, server.URL())
	name := fmt.Sprintf("old_%d", tableSeq.Add(1))
	sql, err := postgres.Schema(name)
	if err != nil {
		t.Fatal(err)
	}
	old := sql[:strings.Index(sql, "-- Follow's feed")]
	if _, err := pool.Exec(ctx, old); err != nil {
		t.Fatal(err)
	}
	st, err := postgres.New(pool, name)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v := put(t, st, "a.example", driver.NoVersion, "x", time.Hour)
	short, cancel := context.WithTimeout(ctx, 5*time.Second) // it refuses at once, or follows until this ends
	defer cancel()
	err = st.Follow(short, "", time.Second, func(driver.Change) {})
	if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "kvbreaker init --backend postgres --postgres-table "+name) {
		t.Fatalf("Follow on a table without the trigger = %v, want errors.ErrUnsupported saying to run kvbreaker init", err)
	}
	if err := postgres.CreateTable(ctx, pool, name); err != nil {
		t.Fatalf("CreateTable over the existing table = %v", err)
	}
	f := &feed{}
	follow(t, st, "", 50*time.Millisecond, f)
	f.syncedSince(t, time.Time{})
	v2 := put(t, st, "a.example", v, "y", time.Hour)
	if m := f.syncedSince(t, time.Now()); m["a.example"] != v2 {
		t.Fatalf("mirror = %v, want a.example v%d", m, v2)
	}
}

// TestFollowDelay logs the feed's delay on loopback: from a
// compare-and-swap's return to its Stale's delivery, over 1,000 writes (a
// measurement; nothing is asserted about it).
func TestFollowDelay(t *testing.T) {
	if testing.Short() {
		t.Skip("a measurement of 1,000 writes")
	}
	st := newRaw(t)
	p := uniquePrefix(t)
	f := &feed{}
	follow(t, st, p, time.Second, f)
	f.syncedSince(t, time.Time{})
	const n = 1000
	delays := make([]time.Duration, 0, n)
	v := driver.NoVersion
	for i := range n {
		var err error
		v, err = st.CompareAndSwap(t.Context(), p+"k", v, []byte{byte(i)}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		returned := time.Now()
		var arrived time.Time
		// Each write is notified once and the next is sent after this
		// one's Stale arrived: the i-th Stale after the snapshot is this
		// write's.
		f.waitFor(t, "the write's Stale", func(ev []event) bool {
			if count(ev, driver.ChangeStale) <= i {
				return false
			}
			seen := 0
			for _, e := range ev {
				if e.Kind == driver.ChangeStale {
					if seen == i {
						arrived = e.arrived
						return true
					}
					seen++
				}
			}
			return false
		})
		delays = append(delays, arrived.Sub(returned))
	}
	slices.Sort(delays)
	t.Logf("feed delay (compare-and-swap returned → Stale delivered) over %d writes on loopback: p50 %v, p99 %v, max %v (negative: delivered before the writer had its answer)",
		n, delays[n/2], delays[n*99/100], delays[n-1])
}

// TestTriggerNotifies: what the trigger sends, read by a plain LISTEN: the
// key of a create, a swap and a delete, and of the purge of a row that
// expired; nothing for a failed compare-and-swap (which rewrites the row
// unchanged) nor for the purge of a tombstone.
func TestTriggerNotifies(t *testing.T) {
	ctx := t.Context()
	pool := newPool(t, server.URL())
	name := ownTable(t, pool)
	st, err := postgres.New(pool, name, postgres.WithPurgeEvery(0), postgres.WithPurgeDelay(time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+postgres.Channel(name)); err != nil {
		t.Fatal(err)
	}
	v := put(t, st, "a", driver.NoVersion, "1", time.Hour)
	if _, err := st.CompareAndSwap(ctx, "a", v+1000, []byte("x"), time.Hour); !errors.Is(err, driver.ErrConflict) {
		t.Fatalf("failed swap = %v", err)
	}
	v = put(t, st, "a", v, "2", time.Hour)
	if err := st.CompareAndDelete(ctx, "a", v); err != nil {
		t.Fatal(err)
	}
	put(t, st, "b", driver.NoVersion, "1", time.Microsecond) // expires at once
	// The purge removes a's tombstone (nothing) and b (its key).
	for {
		n, err := st.Purge(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if _, err := pool.Exec(ctx, "SELECT pg_notify($1, 'end')", postgres.Channel(name)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n.Payload == "end" {
			break
		}
		got = append(got, n.Payload)
	}
	if fmt.Sprint(got) != "[ka ka ka kb kb]" {
		t.Fatalf("notifications = %q, want [ka ka ka kb kb]: a's create, swap and delete, b's create and purge", got)
	}
}
