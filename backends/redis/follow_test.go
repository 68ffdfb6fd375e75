package redis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// feed records what Follow delivers, with the instant each change arrived.
type feed struct {
	mu      sync.Mutex
	changes []driver.Change
	at      []time.Time
	notify  chan struct{}
}

func newFeed() *feed { return &feed{notify: make(chan struct{}, 1)} }

func (f *feed) fn(c driver.Change) {
	now := time.Now()
	c.Value = slices.Clone(c.Value)
	f.mu.Lock()
	f.changes = append(f.changes, c)
	f.at = append(f.at, now)
	f.mu.Unlock()
	select {
	case f.notify <- struct{}{}:
	default:
	}
}

func (f *feed) snapshot() []driver.Change {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.changes)
}

// arrivals returns the changes and when each arrived.
func (f *feed) arrivals() ([]driver.Change, []time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.changes), slices.Clone(f.at)
}

// waitFor waits until pred holds for the changes from index from on, and
// returns the index just past the change where it first held.
func (f *feed) waitFor(t *testing.T, from int, timeout time.Duration, what string, pred func([]driver.Change) int) int {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		cs := f.snapshot()
		if from <= len(cs) {
			if i := pred(cs[from:]); i >= 0 {
				return from + i + 1
			}
		}
		select {
		case <-f.notify:
		case <-deadline.C:
			t.Fatalf("after %v no %s; feed from %d: %s", timeout, what, from, describe(f.snapshot()[min(from, len(f.snapshot())):]))
			return 0
		}
	}
}

func describe(cs []driver.Change) string {
	var b strings.Builder
	for _, c := range cs {
		switch c.Kind {
		case driver.ChangePut:
			fmt.Fprintf(&b, "put(%s=%q@%d) ", c.Key, c.Value, c.Version)
		case driver.ChangeDelete:
			fmt.Fprintf(&b, "delete(%s) ", c.Key)
		case driver.ChangeStale:
			fmt.Fprintf(&b, "stale(%s) ", c.Key)
		case driver.ChangeLost:
			fmt.Fprintf(&b, "lost(%v) ", c.Err)
		default:
			b.WriteString(c.Kind.String() + " ")
		}
	}
	return b.String()
}

// kindIs finds the first change of kind k.
func kindIs(k driver.ChangeKind) func([]driver.Change) int {
	return func(cs []driver.Change) int {
		return slices.IndexFunc(cs, func(c driver.Change) bool { return c.Kind == k })
	}
}

// putOf finds the first Put of key at version ver (any version if 0).
func putOf(key string, ver driver.Version) func([]driver.Change) int {
	return func(cs []driver.Change) int {
		return slices.IndexFunc(cs, func(c driver.Change) bool {
			return c.Kind == driver.ChangePut && c.Key == key && (ver == 0 || c.Version == ver)
		})
	}
}

// putOrStaleOf finds the first Put of key at version ver, or Stale of key:
// a write that commits between the snapshot's tracking and its SCAN is in
// the snapshot, one after it arrives as Stale.
func putOrStaleOf(key string, ver driver.Version) func([]driver.Change) int {
	return func(cs []driver.Change) int {
		return slices.IndexFunc(cs, func(c driver.Change) bool {
			return c.Key == key && (c.Kind == driver.ChangeStale || c.Kind == driver.ChangePut && c.Version == ver)
		})
	}
}

// staleOf finds the first Stale of key.
func staleOf(key string) func([]driver.Change) int {
	return func(cs []driver.Change) int {
		return slices.IndexFunc(cs, func(c driver.Change) bool { return c.Kind == driver.ChangeStale && c.Key == key })
	}
}

// resynced finds the first Synced after a Reset that follows a Lost.
func resynced(cs []driver.Change) int {
	lost := slices.IndexFunc(cs, func(c driver.Change) bool { return c.Kind == driver.ChangeLost })
	if lost < 0 {
		return -1
	}
	reset := slices.IndexFunc(cs[lost:], func(c driver.Change) bool { return c.Kind == driver.ChangeReset })
	if reset < 0 {
		return -1
	}
	synced := slices.IndexFunc(cs[lost+reset:], func(c driver.Change) bool { return c.Kind == driver.ChangeSynced })
	if synced < 0 {
		return -1
	}
	return lost + reset + synced
}

// follow runs st.Follow in a goroutine until the test ends, and checks it
// returned ctx's error.
func follow(t *testing.T, st *redis.Store, prefix string, hb time.Duration) *feed {
	t.Helper()
	f := newFeed()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- st.Follow(ctx, prefix, hb, f.fn) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Follow returned %v, want context.Canceled", err)
		}
	})
	return f
}

// followConns returns the client ids of the follow connections on the
// server c talks to: the subscriber, which tracks (flags P and t), and the
// others (the one that checks the marker).
func followConns(t *testing.T, c *goredis.Client) (sub, marker []int64) {
	t.Helper()
	list, err := c.ClientList(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(list) {
		fields := map[string]string{}
		for kv := range strings.FieldsSeq(line) {
			k, v, _ := strings.Cut(kv, "=")
			fields[k] = v
		}
		if fields["name"] != redis.FollowClientName {
			continue
		}
		id, _ := strconv.ParseInt(fields["id"], 10, 64)
		switch {
		case strings.Contains(fields["flags"], "P") && strings.Contains(fields["flags"], "t"):
			sub = append(sub, id)
		default:
			marker = append(marker, id)
		}
	}
	return sub, marker
}

func killClient(t *testing.T, c *goredis.Client, id int64) {
	t.Helper()
	if err := c.Do(t.Context(), "CLIENT", "KILL", "ID", id).Err(); err != nil {
		t.Fatal(err)
	}
}

const followHB = 100 * time.Millisecond

// TestFollowSnapshotAndChanges: the snapshot holds every key under the
// prefix Get reads as a value (a record, a string key as foreign data)
// and nothing else (a tombstone, a hash without v, a key outside the
// prefix); then each write, delete and expiry is a Stale of its key (the
// feed reads nothing after the snapshot), and Synced keeps coming.
func TestFollowSnapshotAndChanges(t *testing.T) {
	ctx := t.Context()
	c := newClient(t, srv.Addr())
	st := newRaw(t, srv.Addr())
	p := uniquePrefix(t)
	va, err := st.CompareAndSwap(ctx, p+"a", driver.NoVersion, []byte("A"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	vb, err := st.CompareAndSwap(ctx, p+"b", driver.NoVersion, []byte("B"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CompareAndDelete(ctx, p+"b", vb); err != nil { // a tombstone
		t.Fatal(err)
	}
	if err := c.Set(ctx, p+"str", "foreign", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(ctx, p+"nov", "owner", "x").Err(); err != nil { // reads as absent
		t.Fatal(err)
	}
	if _, err := st.CompareAndSwap(ctx, "elsewhere/"+p, driver.NoVersion, []byte("X"), time.Minute); err != nil {
		t.Fatal(err)
	}
	_, vstr, err := st.Get(ctx, p+"str")
	if err != nil {
		t.Fatal(err)
	}

	f := follow(t, st, p, followHB)
	n := f.waitFor(t, 0, 5*time.Second, "first Synced", kindIs(driver.ChangeSynced))
	cs := f.snapshot()[:n]
	if cs[0].Kind != driver.ChangeReset {
		t.Fatalf("feed starts with %v, want reset", cs[0].Kind)
	}
	puts := map[string]driver.Change{}
	for _, ch := range cs[1 : n-1] {
		if ch.Kind != driver.ChangePut {
			t.Errorf("snapshot holds %s", describe([]driver.Change{ch}))
		}
		puts[ch.Key] = ch
	}
	if got := puts[p+"a"]; string(got.Value) != "A" || got.Version != va {
		t.Errorf("snapshot's %sa = %q@%d, want A@%d", p, got.Value, got.Version, va)
	}
	if got := puts[p+"str"]; string(got.Value) != "foreign" || got.Version != vstr {
		t.Errorf("snapshot's %sstr = %q@%d, want foreign@%d (as Get reads it)", p, got.Value, got.Version, vstr)
	}
	if len(puts) != 2 {
		t.Errorf("snapshot = %s, want only %sa and %sstr", describe(cs), p, p)
	}

	if _, err := st.CompareAndSwap(ctx, p+"d", driver.NoVersion, []byte("D"), time.Minute); err != nil {
		t.Fatal(err)
	}
	n = f.waitFor(t, n, 5*time.Second, "Stale of d", staleOf(p+"d"))
	va2, err := st.CompareAndSwap(ctx, p+"a", va, []byte("A2"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	n = f.waitFor(t, n, 5*time.Second, "Stale of a's second version", staleOf(p+"a"))
	if err := st.CompareAndDelete(ctx, p+"a", va2); err != nil {
		t.Fatal(err)
	}
	n = f.waitFor(t, n, 5*time.Second, "Stale of a's deletion", staleOf(p+"a"))
	if _, err := st.CompareAndSwap(ctx, p+"e", driver.NoVersion, []byte("E"), 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	n = f.waitFor(t, n, 5*time.Second, "Stale of e", staleOf(p+"e"))
	// Redis deletes an expired key when its sampling finds it (ten times a
	// second), or when it is read.
	n = f.waitFor(t, n, 10*time.Second, "Stale of e once expired", staleOf(p+"e"))
	f.waitFor(t, n, 5*time.Second, "Synced after the changes", kindIs(driver.ChangeSynced))
	for _, ch := range f.snapshot()[len(cs):] {
		if ch.Kind == driver.ChangePut || ch.Kind == driver.ChangeDelete {
			t.Errorf("after the snapshot the feed delivered %s: it reads nothing, so only Stale", describe([]driver.Change{ch}))
		}
	}
	for _, ch := range f.snapshot() {
		if ch.Kind == driver.ChangeLost {
			t.Errorf("the feed lost: %v", ch.Err)
		}
		if ch.Key != "" && !strings.HasPrefix(ch.Key, p) {
			t.Errorf("the feed delivered %s, outside the prefix %s", ch.Key, p)
		}
	}
}

// checkSyncedCovers fails t when a Synced whose At is after the write of
// key at ver returned arrives without a Put of it (or a later version), or
// a Stale of key after the write was sent, since the last Reset.
func checkSyncedCovers(t *testing.T, cs []driver.Change, at []time.Time, key string, ver driver.Version, sent, returned time.Time) {
	t.Helper()
	seen := false
	for i, c := range cs {
		switch c.Kind {
		case driver.ChangeReset:
			seen = false
		case driver.ChangePut:
			if c.Key == key && c.Version >= ver {
				seen = true
			}
		case driver.ChangeStale:
			if c.Key == key && !at[i].Before(sent) {
				seen = true
			}
		case driver.ChangeSynced:
			if c.At.After(returned) && !seen {
				t.Errorf("Synced{At: %v} after the write of %s@%d returned at %v, which the feed has not delivered: %s",
					c.At.Format(time.StampMicro), key, ver, returned.Format(time.StampMicro), describe(cs))
				return
			}
		}
	}
}

// TestFollowClientKill: killing the subscriber connection (which tracks
// its own keys), or the one that checks the marker, is a Lost, and the resynchronisation includes a write made while the
// feed was broken; no Synced vouches for a write it missed.
func TestFollowClientKill(t *testing.T) {
	for _, which := range []string{"subscriber", "marker"} {
		t.Run(which, func(t *testing.T) {
			ctx := t.Context()
			s := redistest.MustStart(t) // its own server: CLIENT LIST holds only this test's follow
			c := newClient(t, s.Addr())
			st := newRaw(t, s.Addr())
			p := uniquePrefix(t)
			f := follow(t, st, p, followHB)
			n := f.waitFor(t, 0, 5*time.Second, "first Synced", kindIs(driver.ChangeSynced))
			sub, marker := followConns(t, c)
			if len(sub) != 1 || len(marker) != 1 {
				t.Fatalf("follow connections: subscriber and tracking %v, marker %v; want one of each", sub, marker)
			}
			victim := sub[0]
			if which == "marker" {
				victim = marker[0]
			}
			killClient(t, c, victim)
			sent := time.Now()
			v, err := st.CompareAndSwap(ctx, p+"during", driver.NoVersion, []byte("x"), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			returned := time.Now()
			f.waitFor(t, n, 5*time.Second, "Lost then a resync", resynced)
			cs, at := f.arrivals()
			lost := n + slices.IndexFunc(cs[n:], func(c driver.Change) bool { return c.Kind == driver.ChangeLost })
			t.Logf("lost: %v", cs[lost].Err)
			if i := putOrStaleOf(p+"during", v)(cs[lost:]); i < 0 {
				t.Errorf("the resync did not deliver the write made meanwhile: %s", describe(cs[lost:]))
			}
			checkSyncedCovers(t, cs, at, p+"during", v, sent, returned)
			// The new session's connections replace the old ones.
			if sub, marker := followConns(t, c); len(sub) != 1 || len(marker) != 1 || slices.Contains(append(sub, marker...), victim) {
				t.Errorf("after the resync, follow connections: subscriber %v, marker %v; want one new of each", sub, marker)
			}
		})
	}
}

// TestFollowServerFaults: a restart (empty) is a Lost and a resync that
// holds what was written after it; a SIGSTOP is a Lost and no Synced
// vouches for the pause; FLUSHALL is a Lost and a resync.
func TestFollowServerFaults(t *testing.T) {
	ctx := t.Context()
	s := redistest.MustStart(t)
	c := newClient(t, s.Addr())
	st := newRaw(t, s.Addr())
	p := uniquePrefix(t)
	if _, err := st.CompareAndSwap(ctx, p+"before", driver.NoVersion, []byte("x"), time.Minute); err != nil {
		t.Fatal(err)
	}
	f := follow(t, st, p, followHB)
	n := f.waitFor(t, 0, 5*time.Second, "first Synced", kindIs(driver.ChangeSynced))

	t.Run("restart", func(t *testing.T) {
		s.Stop()
		if err := s.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		sent := time.Now()
		v, err := st.CompareAndSwap(ctx, p+"after", driver.NoVersion, []byte("y"), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		returned := time.Now()
		n = f.waitFor(t, n, 10*time.Second, "Lost then a resync holding the new write", func(cs []driver.Change) int {
			i := resynced(cs)
			if i < 0 || putOrStaleOf(p+"after", v)(cs) < 0 {
				return -1
			}
			return max(i, putOrStaleOf(p+"after", v)(cs))
		})
		cs, at := f.arrivals()
		checkSyncedCovers(t, cs, at, p+"after", v, sent, returned)
		// The restarted server is empty: the last snapshot holds no "before".
		r := len(cs) - 1
		for r >= 0 && cs[r].Kind != driver.ChangeReset {
			r--
		}
		if putOf(p+"before", 0)(cs[r:]) >= 0 {
			t.Errorf("the resync after a restart delivered %sbefore, which the empty server does not hold", p)
		}
	})

	t.Run("paused", func(t *testing.T) {
		pausedAt := time.Now()
		if err := s.Pause(); err != nil {
			t.Fatal(err)
		}
		f.waitFor(t, n, 5*time.Second, "Lost while paused", kindIs(driver.ChangeLost))
		// The pause lasts a few heartbeats more, the fault under test.
		pause := time.NewTimer(3 * followHB)
		<-pause.C
		for _, ch := range f.snapshot()[n:] {
			if ch.Kind == driver.ChangeSynced && !ch.At.Before(pausedAt) {
				t.Errorf("Synced{At: %v} while the server was paused from %v", ch.At.Format(time.StampMicro), pausedAt.Format(time.StampMicro))
			}
		}
		resumed := len(f.snapshot())
		if err := s.Resume(); err != nil {
			t.Fatal(err)
		}
		n = f.waitFor(t, resumed, 10*time.Second, "a resync after the pause", func(cs []driver.Change) int {
			r := kindIs(driver.ChangeReset)(cs)
			if r < 0 {
				return -1
			}
			if i := kindIs(driver.ChangeSynced)(cs[r:]); i >= 0 {
				return r + i
			}
			return -1
		})
	})

	t.Run("flushall", func(t *testing.T) {
		if _, err := st.CompareAndSwap(ctx, p+"flushed", driver.NoVersion, []byte("z"), time.Minute); err != nil {
			t.Fatal(err)
		}
		n = f.waitFor(t, n, 5*time.Second, "Stale of the key to flush", staleOf(p+"flushed"))
		from := n
		if err := c.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		flushed := time.Now()
		n = f.waitFor(t, n, 5*time.Second, "Lost then a resync after FLUSHALL", resynced)
		cs := f.snapshot()
		t.Logf("lost: %v", cs[from+kindIs(driver.ChangeLost)(cs[from:])].Err)
		// No Synced after the flush vouches for the flushed key.
		held := false
		for _, ch := range cs {
			switch {
			case ch.Kind == driver.ChangeReset:
				held = false
			case ch.Key == p+"flushed":
				// After a Stale a mirror reads the key and holds what
				// it found.
				held = ch.Kind == driver.ChangePut || ch.Kind == driver.ChangeStale
			case ch.Kind == driver.ChangeSynced && ch.At.After(flushed) && held:
				t.Fatalf("Synced{At: %v} after FLUSHALL at %v with the flushed key still held: %s",
					ch.At.Format(time.StampMicro), flushed.Format(time.StampMicro), describe(cs[from:]))
			}
		}
	})
}

// TestFollowUnsupported: a Cluster, a Ring, a failover client and replica
// reads are refused with errors.ErrUnsupported, before sending anything.
func TestFollowUnsupported(t *testing.T) {
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: true})
	ring := goredis.NewRing(&goredis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, ContextTimeoutEnabled: true})
	fo := goredis.NewFailoverClient(&goredis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cc.Close(); _ = ring.Close(); _ = fo.Close() })
	replica, err := redis.New(newClient(t, srv.Addr()), redis.WithReplicaReads(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]*redis.Store{
		"cluster": must(redis.New(cc)), "ring": must(redis.New(ring)), "failover": must(redis.New(fo)), "replica reads": replica,
	} {
		err := st.Follow(t.Context(), "p/", time.Second, func(driver.Change) { t.Error("fn called") })
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s: Follow = %v, want errors.ErrUnsupported", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
}

func must(s *redis.Store, err error) *redis.Store {
	if err != nil {
		panic(err)
	}
	return s
}

// TestFollowClose: Close ends a running Follow with ErrClosed after it has
// closed its connections.
func TestFollowClose(t *testing.T) {
	s := redistest.MustStart(t)
	st := newRaw(t, s.Addr())
	f := newFeed()
	done := make(chan error, 1)
	go func() { done <- st.Follow(context.Background(), "p/", followHB, f.fn) }()
	f.waitFor(t, 0, 5*time.Second, "first Synced", kindIs(driver.ChangeSynced))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, redis.ErrClosed) {
		t.Errorf("Follow after Close = %v, want ErrClosed", err)
	}
	if err := st.Follow(t.Context(), "p/", followHB, f.fn); !errors.Is(err, redis.ErrClosed) {
		t.Errorf("Follow on a closed Store = %v, want ErrClosed", err)
	}
}

// TestFollowDelay measures, on loopback, the time from a write's return to
// its Stale's delivery over sequential writes (no timed assertion).
func TestFollowDelay(t *testing.T) {
	ctx := t.Context()
	st := newRaw(t, srv.Addr())
	p := uniquePrefix(t)
	f := follow(t, st, p, time.Second)
	n := f.waitFor(t, 0, 5*time.Second, "first Synced", kindIs(driver.ChangeSynced))
	writes := 1000
	if testing.Short() {
		writes = 200
	}
	delays := make([]time.Duration, 0, writes)
	for i := range writes {
		key := p + strconv.Itoa(i%50)
		_, old, err := st.Get(ctx, key)
		if err != nil && !errors.Is(err, driver.ErrNotFound) {
			t.Fatal(err)
		}
		if _, err := st.CompareAndSwap(ctx, key, old, []byte("v"), time.Minute); err != nil {
			t.Fatal(err)
		}
		returned := time.Now()
		n = f.waitFor(t, n, 5*time.Second, "Stale of "+key, staleOf(key))
		f.mu.Lock()
		at := f.at[n-1]
		f.mu.Unlock()
		delays = append(delays, at.Sub(returned))
	}
	slices.Sort(delays)
	early := 0
	for _, d := range delays {
		if d < 0 {
			early++
		}
	}
	t.Logf("feed delay over %d writes on loopback (write returned → Stale delivered): p50 %v, p99 %v, max %v; %d arrived before the write returned (negative delay)",
		writes, delays[len(delays)/2], delays[len(delays)*99/100], delays[len(delays)-1], early)
}

// TestHarnessBreakFeed: the conformance harness's BreakFeed cuts a
// follower's connections (through the fault proxy, as the suite's stores
// connect), which the follower reports as Lost and then resyncs.
func TestHarnessBreakFeed(t *testing.T) {
	hh, err := newHarness(t.Context(), t)
	if err != nil {
		t.Fatal(err)
	}
	h := hh.(*harness)
	t.Cleanup(h.Close) // after the Follow's cleanup, which is registered later
	if err := h.BreakFeed(t.Context()); err == nil {
		t.Error("BreakFeed with no Follow running succeeded, want an error saying so")
	}
	st, err := redis.New(h.client)
	if err != nil {
		t.Fatal(err)
	}
	f := follow(t, st, uniquePrefix(t), followHB)
	n := f.waitFor(t, 0, 5*time.Second, "first Synced", kindIs(driver.ChangeSynced))
	if err := h.BreakFeed(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.waitFor(t, n, 5*time.Second, "Lost then a resync", resynced)
}
