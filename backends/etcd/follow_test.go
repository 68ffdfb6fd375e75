package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/etcdtest"
)

// The Store follows.
var _ driver.Follower = (*etcd.Store)(nil)

// followHeartbeat is the tests' heartbeat: short, so a test sees several.
const followHeartbeat = 50 * time.Millisecond

// feedWait bounds the wait for one change of a feed (a loaded 2-core
// machine, a server restarting).
const feedWait = 15 * time.Second

// feed records a Follow's changes as they arrive, with their arrival time.
type feed struct {
	ch   chan arrival
	done chan error
	stop context.CancelFunc
	// hold, when set, is called by fn before it records a change, on
	// Follow's goroutine.
	hold func(driver.Change)
}

type arrival struct {
	driver.Change
	when time.Time
}

// follow runs st.Follow(prefix) until the test ends, and checks then that
// it returned ctx's error.
func follow(t testing.TB, st *etcd.Store, prefix string, hold func(driver.Change)) *feed {
	t.Helper()
	return followOn(t, st, prefix, hold, false)
}

// followOn is follow, or with demand st.FollowDemand(prefix) asked for a
// beat every 5 ms, so that it beats for the fleet all along.
func followOn(t testing.TB, st *etcd.Store, prefix string, hold func(driver.Change), demand bool) *feed {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &feed{ch: make(chan arrival, 1<<16), done: make(chan error, 1), stop: cancel, hold: hold}
	fn := func(c driver.Change) {
		if f.hold != nil {
			f.hold(c)
		}
		f.ch <- arrival{c, time.Now()}
	}
	go func() {
		if !demand {
			f.done <- st.Follow(ctx, prefix, followHeartbeat, fn)
			return
		}
		want := make(chan struct{}, 1)
		go backendtest.Ask(ctx, want, 5*time.Millisecond)
		f.done <- st.FollowDemand(ctx, prefix, followHeartbeat, want, fn)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-f.done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Follow returned %v after its context was canceled, want context.Canceled", err)
			}
		case <-time.After(feedWait):
			t.Errorf("Follow did not return within %v of its context's end", feedWait)
		}
	})
	return f
}

// next returns the next change.
func (f *feed) next(t testing.TB) arrival {
	t.Helper()
	select {
	case a := <-f.ch:
		return a
	case err := <-f.done:
		t.Fatalf("Follow returned %v", err)
	case <-time.After(feedWait):
		t.Fatalf("no change within %v", feedWait)
	}
	panic("unreachable")
}

// nextNot returns the next change that is not Synced.
func (f *feed) nextNot(t testing.TB, skip driver.ChangeKind) arrival {
	t.Helper()
	for {
		if a := f.next(t); a.Kind != skip {
			return a
		}
	}
}

// mirror is what a follower knows: the keys it was given, and whether it
// may decide from them (a Synced after the last Reset, and no Lost since).
type mirror struct {
	keys    map[string]entry
	reset   bool // a Reset was seen and no Lost since
	healthy bool
	lost    []error
	synced  time.Time
}

type entry struct {
	value   string
	version driver.Version
}

func (m *mirror) apply(t testing.TB, c driver.Change) {
	t.Helper()
	switch c.Kind {
	case driver.ChangeReset:
		m.keys, m.reset, m.healthy = map[string]entry{}, true, false
	case driver.ChangePut:
		if !m.reset {
			t.Fatalf("put %q before any reset", c.Key)
		}
		if old, ok := m.keys[c.Key]; ok && old.version >= c.Version {
			t.Fatalf("put %q at version %d after version %d: out of order", c.Key, c.Version, old.version)
		}
		m.keys[c.Key] = entry{string(c.Value), c.Version}
	case driver.ChangeDelete:
		if !m.reset {
			t.Fatalf("delete %q before any reset", c.Key)
		}
		delete(m.keys, c.Key)
	case driver.ChangeSynced:
		if c.At.IsZero() || c.At.After(time.Now()) {
			t.Fatalf("synced at %v, now %v", c.At, time.Now())
		}
		if !m.synced.IsZero() && c.At.Before(m.synced) && m.healthy {
			t.Fatalf("synced at %v after synced at %v", c.At, m.synced)
		}
		m.synced, m.healthy = c.At, m.reset
	case driver.ChangeLost:
		if c.Err == nil {
			t.Fatal("lost without an error")
		}
		m.lost = append(m.lost, c.Err)
		m.reset, m.healthy = false, false
	default:
		t.Fatalf("unknown change %v", c.Kind)
	}
}

// until applies f's changes to m until m is healthy and ok(m) holds after
// a Synced.
func (f *feed) until(t testing.TB, m *mirror, what string, ok func(*mirror) bool) {
	t.Helper()
	deadline := time.After(feedWait)
	for {
		select {
		case a := <-f.ch:
			m.apply(t, a.Change)
			if a.Kind == driver.ChangeSynced && m.healthy && ok(m) {
				return
			}
		case err := <-f.done:
			t.Fatalf("waiting for %s: Follow returned %v", what, err)
		case <-deadline:
			t.Fatalf("waiting for %s: not within %v (mirror %v, healthy %v, lost %v)", what, feedWait, m.keys, m.healthy, m.lost)
		}
	}
}

// stored reads every key under prefix as Get returns them.
func stored(t testing.TB, cli *clientv3.Client, prefix string) map[string]entry {
	t.Helper()
	resp, err := cli.Get(t.Context(), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]entry{}
	for _, kv := range resp.Kvs {
		if strings.HasSuffix(string(kv.Key), etcd.BeatSuffix) {
			continue // a feed's beat, no record (beat.go)
		}
		out[string(kv.Key)] = entry{string(kv.Value), driver.Version(kv.ModRevision)}
	}
	return out
}

// equalsStore is until's condition: the mirror holds what the store holds.
func equalsStore(t testing.TB, cli *clientv3.Client, prefix string) func(*mirror) bool {
	return func(m *mirror) bool { return maps.Equal(m.keys, stored(t, cli, prefix)) }
}

func noLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// TestFollow: a snapshot of exactly the live keys under the prefix (a
// value no Breaker wrote included, a deleted key and a key beside the
// prefix not), with the values and versions Get returns, then each write
// and deletion in revision order, a lease's revocation as a delete, and
// Synced every heartbeat with an At that covers the writes returned
// before it.
func TestFollow(t *testing.T) {
	noLeaks(t)
	ctx := t.Context()
	prefix := uniquePrefix(t)
	cli := newClient(t)
	st, err := etcd.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	write := func(key string, old driver.Version, value string) driver.Version {
		t.Helper()
		v, err := st.CompareAndSwap(ctx, prefix+key, old, []byte(value), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	va := write("a", driver.NoVersion, "a1")
	write("gone", driver.NoVersion, "x")
	if err := st.CompareAndDelete(ctx, prefix+"gone", mustVersion(t, st, prefix+"gone")); err != nil {
		t.Fatal(err)
	}
	if err := plantForeign(ctx, cli, prefix+"foreign", "garbage"); err != nil {
		t.Fatal(err)
	}
	// Beside the prefix: shares its bytes but for the trailing slash.
	if _, err := cli.Put(ctx, strings.TrimSuffix(prefix, "/")+"x", "beside"); err != nil {
		t.Fatal(err)
	}

	before := time.Now()
	f := follow(t, st, prefix, nil)
	if a := f.next(t); a.Kind != driver.ChangeReset {
		t.Fatalf("first change %v, want reset", a.Kind)
	}
	m := &mirror{keys: map[string]entry{}, reset: true}
	for {
		a := f.next(t)
		m.apply(t, a.Change)
		if a.Kind == driver.ChangeSynced {
			if a.At.Before(before) {
				t.Errorf("the snapshot's synced at %v, before Follow was called at %v", a.At, before)
			}
			break
		}
		if a.Kind != driver.ChangePut {
			t.Fatalf("snapshot sent %v", a.Kind)
		}
	}
	if want := stored(t, cli, prefix); !maps.Equal(m.keys, want) {
		t.Fatalf("snapshot %v, want %v", m.keys, want)
	}
	if got := slices.Sorted(maps.Keys(m.keys)); !slices.Equal(got, []string{prefix + "a", prefix + "foreign"}) {
		t.Fatalf("snapshot keys %q", got)
	}

	// Changes after the snapshot, in revision order.
	vb := write("b", driver.NoVersion, "b1")
	va2 := write("a", va, "a2")
	if err := st.CompareAndDelete(ctx, prefix+"b", vb); err != nil {
		t.Fatal(err)
	}
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	put, err := cli.Put(ctx, prefix+"leased", "l", clientv3.WithLease(lease.ID))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	wrote := time.Now()
	want := []driver.Change{
		{Kind: driver.ChangePut, Key: prefix + "b", Value: []byte("b1"), Version: vb},
		{Kind: driver.ChangePut, Key: prefix + "a", Value: []byte("a2"), Version: va2},
		{Kind: driver.ChangeDelete, Key: prefix + "b", Version: vb},
		{Kind: driver.ChangePut, Key: prefix + "leased", Value: []byte("l"), Version: driver.Version(put.Header.Revision)},
		{Kind: driver.ChangeDelete, Key: prefix + "leased", Version: driver.Version(put.Header.Revision)},
	}
	for i, w := range want {
		a := f.nextNot(t, driver.ChangeSynced)
		m.apply(t, a.Change)
		if a.Kind != w.Kind || a.Key != w.Key || string(a.Value) != string(w.Value) || a.Version != w.Version {
			t.Fatalf("change %d = %v %q %q v%d, want %v %q %q v%d", i, a.Kind, a.Key, a.Value, a.Version, w.Kind, w.Key, w.Value, w.Version)
		}
	}
	// A Synced whose At is after the writes returned, which the mirror
	// has then seen.
	f.until(t, m, "a synced after the writes", func(m *mirror) bool { return m.synced.After(wrote) })
	if want := stored(t, cli, prefix); !maps.Equal(m.keys, want) {
		t.Fatalf("mirror %v, store %v", m.keys, want)
	}
	// Synced keeps coming while nothing is written under the prefix, and
	// while the cluster's revision moves on beside it (the watch then has
	// no event to show it caught up: a progress notification does).
	for i := range 4 {
		if i%2 == 1 {
			if _, err := cli.Put(ctx, strings.TrimSuffix(prefix, "/")+"x", "beside"); err != nil {
				t.Fatal(err)
			}
		}
		last := time.Now()
		f.until(t, m, "another synced", func(m *mirror) bool { return m.synced.After(last) })
	}
	if len(m.lost) > 0 {
		t.Errorf("lost on a healthy server: %v", m.lost)
	}
}

func mustVersion(t testing.TB, st *etcd.Store, key string) driver.Version {
	t.Helper()
	_, v, err := st.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestFollowExpiry: a key whose lease expires arrives as a delete, within
// the lease's TTL and the leader's expiry check.
func TestFollowExpiry(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a 1 s lease to expire")
	}
	noLeaks(t)
	ctx := t.Context()
	prefix := uniquePrefix(t)
	cli := newClient(t)
	st, err := etcd.New(cli, etcd.WithLeaseReuse(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	f := follow(t, st, prefix, nil)
	m := &mirror{}
	f.until(t, m, "the snapshot", func(*mirror) bool { return true })
	// The lease is granted somewhere inside the call: its expiry comes at
	// least 1 s after the call began, and within the limit after it ended
	// (on a loaded machine the call's answer can come long after the grant).
	began := time.Now()
	v, err := st.CompareAndSwap(ctx, prefix+"short", driver.NoVersion, []byte("x"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wrote := time.Now()
	a := f.nextNot(t, driver.ChangeSynced)
	if a.Kind != driver.ChangePut || a.Version != v {
		t.Fatalf("got %v v%d, want the put at v%d", a.Kind, a.Version, v)
	}
	a = f.nextNot(t, driver.ChangeSynced)
	if a.Kind != driver.ChangeDelete || a.Key != prefix+"short" || a.Version != v {
		t.Fatalf("got %v %q v%d, want the expiry's delete of v%d", a.Kind, a.Key, a.Version, v)
	}
	took := a.when.Sub(wrote)
	if limit := st.MinTTL() + etcd.CheckInterval + time.Second; a.when.Sub(began) < time.Second || took > limit {
		t.Errorf("expiry delivered %v after the write began and %v after it ended, want at least 1 s after it began and at most %v after it ended", a.when.Sub(began), took, limit)
	}
	t.Logf("a 1 s lease's expiry delivered %v after the write", took.Round(time.Millisecond))
}

// TestFollowSnapshotPages: a snapshot larger than a page holds every key
// once, in key order, read at one revision.
func TestFollowSnapshotPages(t *testing.T) {
	noLeaks(t)
	ctx := t.Context()
	prefix := uniquePrefix(t)
	cli := newClient(t)
	st, err := etcd.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1300 // more than two pages
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				if _, err := cli.Put(ctx, fmt.Sprintf("%s%05d", prefix, i), "v"); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	f := follow(t, st, prefix, nil)
	var keys []string
	for a := f.next(t); a.Kind != driver.ChangeSynced; a = f.next(t) {
		if a.Kind == driver.ChangePut {
			keys = append(keys, a.Key)
		}
	}
	if len(keys) != n || !slices.IsSorted(keys) || len(slices.Compact(slices.Clone(keys))) != n {
		t.Fatalf("snapshot of %d keys delivered %d (sorted %v)", n, len(keys), slices.IsSorted(keys))
	}
}

// TestFollowBrokenConnection: a reset connection (the fault proxy between
// the client and etcd) ends the watch with Lost, never a silent resume,
// and Follow resynchronises, the write made meanwhile included.
func TestFollowBrokenConnection(t *testing.T) {
	noLeaks(t)
	ctx := t.Context()
	p, err := faultproxy.Start(strings.TrimPrefix(endpoints[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + p.Addr()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	st, err := etcd.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	direct := newClient(t)
	prefix := uniquePrefix(t)
	if _, err := direct.Put(ctx, prefix+"before", "1"); err != nil {
		t.Fatal(err)
	}
	f := follow(t, st, prefix, nil)
	m := &mirror{}
	f.until(t, m, "the snapshot", equalsStore(t, direct, prefix))

	for round := range 3 {
		p.ResetAll()
		if _, err := direct.Put(ctx, fmt.Sprintf("%smeanwhile%d", prefix, round), "2"); err != nil {
			t.Fatal(err)
		}
		f.until(t, m, "the resync", func(m *mirror) bool { return len(m.lost) > round && equalsStore(t, direct, prefix)(m) })
		if !errors.Is(m.lost[round], etcd.ErrWatchBroken) {
			t.Errorf("lost because %v, want ErrWatchBroken", m.lost[round])
		}
		// The next reset must find the resynced watch open: a Synced
		// stamped after now proves it delivers over a live stream.
		now := time.Now()
		f.until(t, m, "a heartbeat over the new watch", func(m *mirror) bool { return m.healthy && m.synced.After(now) })
	}
	t.Logf("lost: %v", m.lost)
}

// TestFollowFaults runs Follow against a server of its own: a compaction
// past the watch's start revision, a crash and restart, and a pause
// (SIGSTOP).
func TestFollowFaults(t *testing.T) {
	noLeaks(t)
	srv := etcdtest.MustStart(t)
	ctx := t.Context()
	cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	st, err := etcd.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	writer, err := etcd.New(newClientOf(t, srv))
	if err != nil {
		t.Fatal(err)
	}

	compaction := func(t *testing.T, demand bool) {
		prefix := uniquePrefix(t)
		if _, err := writer.CompareAndSwap(ctx, prefix+"before", driver.NoVersion, []byte("1"), time.Minute); err != nil {
			t.Fatal(err)
		}
		// Follow's fn holds the snapshot's Synced, so the watch after it
		// starts only once a write and a compaction past it are done.
		held := make(chan struct{})
		release := make(chan struct{})
		var once sync.Once
		f := followOn(t, st, prefix, func(c driver.Change) {
			if c.Kind == driver.ChangeSynced {
				once.Do(func() { close(held); <-release })
			}
		}, demand)
		<-held
		if _, err := writer.CompareAndSwap(ctx, prefix+"meanwhile", driver.NoVersion, []byte("2"), time.Minute); err != nil {
			t.Fatal(err)
		}
		// Compact past the snapshot's next revision (the watch's start):
		// up to a write after the one above.
		v, err := writer.CompareAndSwap(ctx, prefix+"meanwhile2", driver.NoVersion, []byte("3"), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := writer.Client().Compact(ctx, int64(v), clientv3.WithCompactPhysical()); err != nil {
			t.Fatal(err)
		}
		close(release)
		m := &mirror{}
		f.until(t, m, "the resync", func(m *mirror) bool { return len(m.lost) > 0 && equalsStore(t, cli, prefix)(m) })
		if len(m.lost) != 1 || !errors.Is(m.lost[0], rpctypes.ErrCompacted) {
			t.Errorf("lost %v, want once, with rpctypes.ErrCompacted", m.lost)
		}
		if _, ok := m.keys[prefix+"meanwhile"]; !ok {
			t.Errorf("the resync misses the write made meanwhile: %v", m.keys)
		}
	}
	t.Run("compaction", func(t *testing.T) { compaction(t, false) })
	t.Run("compaction on demand", func(t *testing.T) { compaction(t, true) })

	t.Run("restart", func(t *testing.T) {
		prefix := uniquePrefix(t)
		if _, err := writer.CompareAndSwap(ctx, prefix+"before", driver.NoVersion, []byte("1"), time.Minute); err != nil {
			t.Fatal(err)
		}
		f := follow(t, st, prefix, nil)
		m := &mirror{}
		f.until(t, m, "the snapshot", equalsStore(t, cli, prefix))
		srv.Kill()
		if err := srv.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, feedWait)
		defer cancel()
		if _, err := writer.CompareAndSwap(wctx, prefix+"after", driver.NoVersion, []byte("2"), time.Minute); err != nil {
			t.Fatal(err)
		}
		f.until(t, m, "the resync", func(m *mirror) bool { return len(m.lost) > 0 && equalsStore(t, cli, prefix)(m) })
		t.Logf("lost: %v", m.lost)
	})

	t.Run("pause", func(t *testing.T) {
		prefix := uniquePrefix(t)
		f := follow(t, st, prefix, nil)
		m := &mirror{}
		f.until(t, m, "the snapshot", func(*mirror) bool { return true })
		f.until(t, m, "a heartbeat", func(*mirror) bool { return true })
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		paused := time.Now()
		// Whatever was already on its way before the pause may still
		// arrive; after it, nothing proves the feed current.
		window := time.After(20 * followHeartbeat)
	watch:
		for {
			select {
			case a := <-f.ch:
				m.apply(t, a.Change)
				if a.Kind == driver.ChangeSynced && a.when.Sub(paused) > 2*followHeartbeat {
					t.Errorf("synced (at %v) %v into the pause", a.At, a.when.Sub(paused))
				}
			case <-window:
				break watch
			}
		}
		if err := srv.Resume(); err != nil {
			t.Fatal(err)
		}
		resumed := time.Now()
		v, err := writer.CompareAndSwap(ctx, prefix+"after", driver.NoVersion, []byte("1"), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		f.until(t, m, "the write after the pause", func(m *mirror) bool {
			return m.keys[prefix+"after"].version == v && m.synced.After(resumed)
		})
		// The same watch stream went on: one gRPC stream delivers a watch's
		// events in revision order without gaps, and the Synced after the
		// pause is a linearizable read's revision the stream reached.
		if len(m.lost) > 0 {
			t.Errorf("lost after a pause the connection survived: %v", m.lost)
		}
	})
}

// newClientOf returns a client of srv, closed when t ends.
func newClientOf(t testing.TB, srv *etcdtest.Server) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestFollowArguments: Follow refuses what it cannot follow with, and a
// closed Store.
func TestFollowArguments(t *testing.T) {
	st, err := etcd.New(newClient(t))
	if err != nil {
		t.Fatal(err)
	}
	nop := func(driver.Change) {}
	var oe *driver.OpError
	if err := st.Follow(t.Context(), "p/", 0, nop); !errors.As(err, &oe) {
		t.Errorf("Follow with a zero heartbeat = %v, want an *OpError", err)
	}
	if err := st.Follow(t.Context(), "p/", time.Second, nil); !errors.As(err, &oe) {
		t.Errorf("Follow with a nil fn = %v, want an *OpError", err)
	}
	st.Close()
	if err := st.Follow(t.Context(), "p/", time.Second, nop); !errors.Is(err, etcd.ErrClosed) {
		t.Errorf("Follow on a closed store = %v, want ErrClosed", err)
	}
}

// TestFollowFeedDelay writes records from four writers while a second
// client follows them, checks every Synced{At} against the writes that had
// returned before At (each is in the mirror by then), and logs the feed
// delay: from a write's return to its Put's arrival, p50 and p99 (a
// measurement, not an assertion; 1,000 writes, 200 with -short):
//
//	go test -run TestFollowFeedDelay -v ./backends/etcd/
func TestFollowFeedDelay(t *testing.T) {
	noLeaks(t)
	ctx := t.Context()
	n := 1000
	if testing.Short() {
		n = 200
	}
	prefix := uniquePrefix(t)
	writer, err := etcd.New(newClient(t)) // a client and a lease pool of its own
	if err != nil {
		t.Fatal(err)
	}
	follower, err := etcd.New(newClient(t))
	if err != nil {
		t.Fatal(err)
	}
	f := follow(t, follower, prefix, nil)
	m := &mirror{}
	f.until(t, m, "the snapshot", func(*mirror) bool { return true })

	type write struct {
		key      string
		version  driver.Version
		returned time.Time
	}
	// Four writers on four keys each: writes keep returning while a
	// heartbeat is on its way.
	const writers, keysEach = 4, 4
	var (
		mu     sync.Mutex
		writes = make([]write, 0, n)
		wg     sync.WaitGroup
	)
	for w := range writers {
		wg.Go(func() {
			last := map[string]driver.Version{}
			for i := w; i < n; i += writers {
				key := fmt.Sprintf("%sh%d-%d.example", prefix, w, i%keysEach)
				v, err := writer.CompareAndSwap(ctx, key, last[key], []byte{byte(i)}, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				returned := time.Now()
				last[key] = v
				mu.Lock()
				writes = append(writes, write{key, v, returned})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	slices.SortFunc(writes, func(a, b write) int { return a.returned.Compare(b.returned) })
	done := time.Now()

	arrived := map[driver.Version]time.Time{}
	checked := 0
	pending := writes // by return time
	for {
		a := f.next(t)
		m.apply(t, a.Change)
		if a.Kind == driver.ChangePut {
			arrived[a.Version] = a.when
		}
		if a.Kind != driver.ChangeSynced {
			continue
		}
		// Every write that returned before At is in the mirror.
		for len(pending) > 0 && pending[0].returned.Before(a.At) {
			w := pending[0]
			if got := m.keys[w.key].version; got < w.version {
				t.Fatalf("synced at %v, but %s holds version %d, not the version %d written %v before", a.At, w.key, got, w.version, a.At.Sub(w.returned))
			}
			pending, checked = pending[1:], checked+1
		}
		if a.At.After(done) {
			break
		}
	}
	if len(m.lost) > 0 {
		t.Fatalf("lost: %v", m.lost)
	}
	delays := make([]time.Duration, 0, n)
	for _, w := range writes {
		at, ok := arrived[w.version]
		if !ok {
			t.Fatalf("the write of %s at version %d never arrived", w.key, w.version)
		}
		delays = append(delays, at.Sub(w.returned))
	}
	slices.Sort(delays)
	pct := func(p float64) time.Duration { return delays[int(p*float64(len(delays)-1))] }
	t.Logf("feed delay over %d writes on loopback (write returned → put delivered; negative: delivered before the writer's answer): p50 %v, p99 %v, max %v; %d writes checked against Synced",
		n, pct(0.50), pct(0.99), delays[len(delays)-1], checked)
}
