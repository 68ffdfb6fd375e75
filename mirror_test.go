package kvbreaker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

// counting counts one worker's requests to a store it shares; its feed is
// the store's own (real), or, with script set, the one the test sends.
type counting struct {
	driver.Store
	gets, writes atomic.Int64
	script       chan driver.Change
	// afterGet, if set, runs after each read of the store, before it
	// returns.
	afterGet func(key string)
	// afterWrite, if set, runs after each compare-and-swap, before it
	// returns.
	afterWrite func(key string)
}

func (c *counting) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	c.gets.Add(1)
	v, ver, err := c.Store.Get(ctx, key)
	if c.afterGet != nil {
		c.afterGet(key)
	}
	return v, ver, err
}

func (c *counting) CompareAndSwap(ctx context.Context, key string, old driver.Version, v []byte, ttl time.Duration) (driver.Version, error) {
	c.writes.Add(1)
	ver, err := c.Store.CompareAndSwap(ctx, key, old, v, ttl)
	if c.afterWrite != nil {
		c.afterWrite(key)
	}
	return ver, err
}

func (c *counting) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	c.writes.Add(1)
	return c.Store.CompareAndDelete(ctx, key, old)
}

func (c *counting) Follow(ctx context.Context, prefix string, hb time.Duration, fn func(driver.Change)) error {
	if c.script == nil {
		return c.Store.(driver.Follower).Follow(ctx, prefix, hb, fn)
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ch := <-c.script:
			fn(ch)
		}
	}
}

func (c *counting) requests() int64 { return c.gets.Load() + c.writes.Load() }

// mirrorEvents records Observer.Mirror's reports and MirrorLag's lags.
type mirrorEvents struct {
	mu     sync.Mutex
	states []string
	lags   []time.Duration
}

func (e *mirrorEvents) observer() *kvbreaker.Observer {
	return &kvbreaker.Observer{
		Mirror: func(_ context.Context, i kvbreaker.MirrorInfo) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.states = append(e.states, fmt.Sprintf("%v:%s", i.Healthy, i.Reason))
		},
		MirrorLag: func(_ context.Context, i kvbreaker.MirrorLagInfo) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.lags = append(e.lags, i.Lag)
		},
	}
}

func (e *mirrorEvents) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.states
	e.states = nil
	return s
}

func mirrored(t *testing.T, store driver.Store, s kvbreaker.Settings) *kvbreaker.Breaker {
	t.Helper()
	s.Mirror, s.SkipClockCheck = true, true
	b := newBreaker(t, store, s)
	t.Cleanup(func() { b.Close(context.Background()) })
	return b
}

// TestMirrorAbsentHostCostsNoRequest: with a healthy mirror, Allow and
// Success on a host without a record, and a Failure on an open host, make
// no store request; the Failure that opens the circuit makes one write.
func TestMirrorAbsentHostCostsNoRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := &counting{Store: memory.New()}
		b := mirrored(t, st, kvbreaker.Settings{FailureThreshold: 1})
		synctest.Wait()
		if v, err := b.Allow(ctx, "a.example", time.Time{}); err != nil || v.Decision != kvbreaker.Send {
			t.Fatal(v, err)
		}
		if err := b.Success(ctx, "a.example"); err != nil {
			t.Fatal(err)
		}
		if err := b.ReachableFailure(ctx, "a.example"); err != nil {
			t.Fatal(err)
		}
		if n := st.requests(); n != 0 {
			t.Fatalf("Allow, Success, ReachableFailure on an absent host: %d store requests", n)
		}
		if err := b.Failure(ctx, "a.example"); err != nil {
			t.Fatal(err)
		}
		if n := st.requests(); n != 1 {
			t.Fatalf("the opening Failure: %d store requests, want one write", n)
		}
		if err := b.Failure(ctx, "a.example"); err != nil {
			t.Fatal(err)
		}
		if v, _ := b.Allow(ctx, "a.example", time.Time{}); v.Decision != kvbreaker.Hold {
			t.Fatalf("open host: %v", v.Decision)
		}
		if n := st.requests(); n != 1 {
			t.Fatalf("Failure and Allow on an open host: %d more store requests", n-1)
		}
	})
}

// TestMirrorFleetSeesFailure: a Failure in Breaker A opens the circuit;
// Breaker B, over the same store, holds the host once the feed has
// delivered the write, without reading the store. A measures the write's
// delay through its own feed.
func TestMirrorFleetSeesFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		inner := memory.New()
		sa, sb := &counting{Store: inner}, &counting{Store: inner}
		var ea mirrorEvents
		a := mirrored(t, sa, kvbreaker.Settings{FailureThreshold: 1, Observer: ea.observer()})
		b := mirrored(t, sb, kvbreaker.Settings{FailureThreshold: 1})
		synctest.Wait()
		if v, _ := b.Allow(ctx, "h.example", time.Time{}); v.Decision != kvbreaker.Send {
			t.Fatal(v.Decision)
		}
		if err := a.Failure(ctx, "h.example"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		v, err := b.Allow(ctx, "h.example", time.Time{})
		if err != nil || v.Decision != kvbreaker.Hold {
			t.Fatalf("B after A opened the circuit: %v %v", v.Decision, err)
		}
		if n := sb.requests(); n != 0 {
			t.Fatalf("B made %d store requests", n)
		}
		if got := ea.take(); fmt.Sprint(got) != "[true:synced]" {
			t.Fatalf("A's mirror reports %q", got)
		}
		ea.mu.Lock()
		defer ea.mu.Unlock()
		if len(ea.lags) != 1 {
			t.Fatalf("A's lags: %v, want one for its write", ea.lags)
		}
	})
}

// openRecord is an open circuit's record as the Breaker encodes it.
func openRecord(now time.Time) []byte {
	return record.EncodeRecord(record.Record{Failures: []time.Time{now.Truncate(time.Millisecond)}, RestrainedUntil: now.Add(10 * time.Minute).Truncate(time.Millisecond)})
}

// TestMirrorDecidesOnlyWhileHealthy: over a feed the test sends, the
// mirror decides only between a Synced and a Lost (or MirrorStaleness
// without a Synced); meanwhile every call reads the store, which here
// disagrees with the mirror (it holds no record where the mirror has an
// open one).
func TestMirrorDecidesOnlyWhileHealthy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := &counting{Store: memory.New(), script: make(chan driver.Change)}
		var ev mirrorEvents
		b := mirrored(t, st, kvbreaker.Settings{Observer: ev.observer()})
		decision := func() kvbreaker.Decision {
			t.Helper()
			v, err := b.Allow(ctx, "h.example", time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			return v.Decision
		}
		reads := func() int64 { return st.gets.Swap(0) }
		send := func(cs ...driver.Change) {
			for _, c := range cs {
				st.script <- c
			}
			synctest.Wait()
		}
		// Not yet synced: reads.
		if d := decision(); d != kvbreaker.Send || reads() != 1 {
			t.Fatal("before the first snapshot the store decides")
		}
		open := driver.Change{Kind: driver.ChangePut, Key: "h.example", Value: openRecord(time.Now()), Version: 7}
		send(driver.Change{Kind: driver.ChangeReset}, open, driver.Change{Kind: driver.ChangeSynced, At: time.Now()})
		if d := decision(); d != kvbreaker.Hold || reads() != 0 {
			t.Fatal("a healthy mirror decides")
		}
		send(driver.Change{Kind: driver.ChangeLost, Err: errors.New("connection dropped")})
		if d := decision(); d != kvbreaker.Send || reads() != 1 {
			t.Fatal("after Lost the store decides")
		}
		// A Reset and its snapshot are not enough: only its Synced is.
		send(driver.Change{Kind: driver.ChangeReset}, open)
		if d := decision(); d != kvbreaker.Send || reads() != 1 {
			t.Fatal("during a resync the store decides")
		}
		send(driver.Change{Kind: driver.ChangeSynced, At: time.Now()})
		if d := decision(); d != kvbreaker.Hold || reads() != 0 {
			t.Fatal("resynced, the mirror decides")
		}
		// No heartbeat for MirrorStaleness: reads.
		time.Sleep(defaults.MirrorStaleness)
		if d := decision(); d != kvbreaker.Send || reads() != 1 {
			t.Fatal("a stale mirror decides")
		}
		send(driver.Change{Kind: driver.ChangeSynced, At: time.Now()})
		if d := decision(); d != kvbreaker.Hold || reads() != 0 {
			t.Fatal("after a heartbeat the mirror decides again")
		}
		want := "[true:synced false:lost true:synced false:stale true:synced]"
		if got := fmt.Sprint(ev.take()); got != want {
			t.Fatalf("Observer.Mirror: %s, want %s", got, want)
		}
	})
}

// TestMirrorKeepsOwnWrites: this worker's write is in its mirror at once,
// and an older record arriving through the feed afterwards does not undo
// it; the write's own arrival does not either.
func TestMirrorKeepsOwnWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := &counting{Store: memory.New(), script: make(chan driver.Change)}
		b := mirrored(t, st, kvbreaker.Settings{FailureThreshold: 1})
		send := func(cs ...driver.Change) {
			for _, c := range cs {
				st.script <- c
			}
			synctest.Wait()
		}
		send(driver.Change{Kind: driver.ChangeReset}, driver.Change{Kind: driver.ChangeSynced, At: time.Now()})
		if err := b.Failure(ctx, "h.example"); err != nil {
			t.Fatal(err)
		}
		_, ver, err := st.Store.Get(ctx, "h.example")
		if err != nil {
			t.Fatal(err)
		}
		holds := func(when string) {
			t.Helper()
			v, err := b.Allow(ctx, "h.example", time.Time{})
			if err != nil || v.Decision != kvbreaker.Hold {
				t.Fatalf("%s: %v %v", when, v.Decision, err)
			}
			if n := st.gets.Load(); n != 0 {
				t.Fatalf("%s: %d reads", when, n)
			}
		}
		holds("after its own Failure, before the feed has it")
		// An older write (another worker's closed record) arrives late.
		send(driver.Change{Kind: driver.ChangePut, Key: "h.example", Value: record.EncodeRecord(record.Record{}), Version: ver + 100},
			driver.Change{Kind: driver.ChangeDelete, Key: "h.example", Version: ver + 100})
		holds("after an older record arrived")
		send(driver.Change{Kind: driver.ChangePut, Key: "h.example", Value: openRecord(time.Now()), Version: ver})
		holds("after its own write arrived")

		// Another worker's later write (here a deletion the feed delivers
		// with no version) is in the feed, masked by this worker's write
		// until a Synced after it proves the feed at least as new.
		if err := b.Failure(ctx, "g.example"); err != nil {
			t.Fatal(err)
		}
		send(driver.Change{Kind: driver.ChangeDelete, Key: "g.example"})
		time.Sleep(time.Millisecond)
		send(driver.Change{Kind: driver.ChangeSynced, At: time.Now()})
		if v, _ := b.Allow(ctx, "g.example", time.Time{}); v.Decision != kvbreaker.Send {
			t.Fatalf("after a Synced past its own write, the feed's later record: %v", v.Decision)
		}
	})
}

// TestMirrorOverCapReads: a store holding more records than MirrorSize
// leaves the mirror unhealthy (every Allow reads) until it holds no more,
// and the mirror follows again.
func TestMirrorOverCapReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		inner := memory.New()
		for _, h := range []string{"a", "b", "c"} {
			if _, err := inner.CompareAndSwap(ctx, h, driver.NoVersion, record.EncodeRecord(record.Record{Failures: []time.Time{time.Now().Truncate(time.Millisecond)}}), time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		st := &counting{Store: inner}
		var ev mirrorEvents
		b := mirrored(t, st, kvbreaker.Settings{MirrorSize: 2, Observer: ev.observer()})
		synctest.Wait()
		b.Allow(ctx, "x.example", time.Time{})
		if n := st.gets.Swap(0); n != 1 {
			t.Fatalf("over the cap: %d reads for one Allow, want 1", n)
		}
		if got := fmt.Sprint(ev.take()); got != "[]" {
			// Never healthy: nothing to report yet.
			t.Fatalf("Observer.Mirror: %s", got)
		}
		if err := b.Reset(ctx, "c"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		st.gets.Store(0)
		b.Allow(ctx, "x.example", time.Time{})
		if n := st.gets.Load(); n != 0 {
			t.Fatalf("under the cap again: %d reads", n)
		}
		if got := fmt.Sprint(ev.take()); got != "[true:synced]" {
			t.Fatalf("Observer.Mirror: %s", got)
		}
	})
}

// TestMirrorNeedsFollower: New refuses Mirror over a store that cannot
// follow, directly or under Prefixed, naming the store and the setting.
func TestMirrorNeedsFollower(t *testing.T) {
	bare := onlyStore{memory.New()}
	pre, _ := kvbreaker.Prefixed(bare, "fleet/")
	for _, s := range []driver.Store{bare, pre} {
		_, err := kvbreaker.New(s, kvbreaker.Settings{Mirror: true})
		if err == nil {
			t.Fatalf("Mirror over %T accepted", s)
		}
		for _, want := range []string{"Mirror", fmt.Sprintf("%T", s), "driver.Follower"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		}
	}
	if _, err := kvbreaker.New(memory.New(), kvbreaker.Settings{Mirror: true, MirrorSize: -1, MirrorStaleness: -1}); err == nil ||
		!strings.Contains(err.Error(), "MirrorSize") || !strings.Contains(err.Error(), "MirrorStaleness") {
		t.Errorf("negative MirrorSize and MirrorStaleness: %v", err)
	}
}

// TestMirrorCloseEndsFollow: Close ends the mirror's feed and waits for its
// goroutine (the bubble would report it blocked otherwise); a Prefixed
// store's Breaker follows only its fleet's keys.
func TestMirrorCloseEndsFollow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		inner := memory.New()
		other, _ := kvbreaker.Prefixed(inner, "other/")
		mine, _ := kvbreaker.Prefixed(inner, "mine/")
		a, err := kvbreaker.New(other, kvbreaker.Settings{FailureThreshold: 1, SkipClockCheck: true})
		if err != nil {
			t.Fatal(err)
		}
		a.Failure(ctx, "h.example")
		b, err := kvbreaker.New(mine, kvbreaker.Settings{Mirror: true, SkipClockCheck: true})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if v, _ := b.Allow(ctx, "h.example", time.Time{}); v.Decision != kvbreaker.Send {
			t.Fatalf("another fleet's open circuit reached this one: %v", v.Decision)
		}
		if err := b.Close(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestComposeMirrorHooks: ComposeObservers calls each observer's Mirror and
// MirrorLag hook, in the order given.
func TestComposeMirrorHooks(t *testing.T) {
	var got []string
	mk := func(name string) *kvbreaker.Observer {
		return &kvbreaker.Observer{
			Mirror:    func(_ context.Context, i kvbreaker.MirrorInfo) { got = append(got, name+" "+string(i.Reason)) },
			MirrorLag: func(_ context.Context, i kvbreaker.MirrorLagInfo) { got = append(got, fmt.Sprint(name, " ", i.Lag)) },
		}
	}
	o := kvbreaker.ComposeObservers(mk("a"), nil, &kvbreaker.Observer{}, mk("b"))
	o.Mirror(context.Background(), kvbreaker.MirrorInfo{Reason: "lost"})
	o.MirrorLag(context.Background(), kvbreaker.MirrorLagInfo{Lag: time.Millisecond})
	if want := "[a lost b lost a 1ms b 1ms]"; fmt.Sprint(got) != want {
		t.Fatalf("%v, want %s", got, want)
	}
}

// TestMirrorMemoryPerEntry measures the heap a mirror holds per record
// (host names of 20 bytes, one failure each), as Settings.MirrorSize's doc
// states it, and fails if it grows past 1 KB.
func TestMirrorMemoryPerEntry(t *testing.T) {
	const n = 20_000
	ctx := context.Background()
	inner := memory.New()
	defer inner.Close()
	rec := record.EncodeRecord(record.Record{Failures: []time.Time{time.Now().Truncate(time.Millisecond)}})
	for i := range n {
		if _, err := inner.CompareAndSwap(ctx, fmt.Sprintf("host%06d.example.org", i), driver.NoVersion, rec, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	synced := make(chan struct{}, 1)
	b, err := kvbreaker.New(inner, kvbreaker.Settings{Mirror: true, SkipClockCheck: true, Observer: &kvbreaker.Observer{
		Mirror: func(_ context.Context, i kvbreaker.MirrorInfo) {
			if i.Healthy {
				synced <- struct{}{}
			}
		}}})
	if err != nil {
		t.Fatal(err)
	}
	<-synced
	per := float64(heap()-before) / n
	runtime.KeepAlive(b)
	t.Logf("%.0f bytes per mirrored record (%d records)", per, n)
	if per > 1024 {
		t.Errorf("%.0f bytes per mirrored record", per)
	}
	b.Close(ctx)
}

// silentExpiry is a store whose feed announces no deletion, as PostgreSQL
// announces no expiry until its purge.
type silentExpiry struct{ *memory.Store }

func (s silentExpiry) Follow(ctx context.Context, prefix string, hb time.Duration, fn func(driver.Change)) error {
	return s.Store.Follow(ctx, prefix, hb, func(c driver.Change) {
		if c.Kind != driver.ChangeDelete {
			fn(c)
		}
	})
}

// TestMirrorFailureAfterSilentExpiry: the mirror still holds an open
// record the store no longer has (expired without a word); past its
// restraint a Failure reads the store and counts, as it would have without
// a mirror, instead of deciding "nothing to write" on the stale record.
func TestMirrorFailureAfterSilentExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		inner := memory.New()
		b := mirrored(t, silentExpiry{inner}, kvbreaker.Settings{FailureThreshold: 2, RecoveryDelay: time.Minute})
		synctest.Wait()
		for range 2 {
			if err := b.Failure(ctx, "h.example"); err != nil {
				t.Fatal(err)
			}
		}
		_, ver, err := inner.Get(ctx, "h.example")
		if err != nil {
			t.Fatal(err)
		}
		// Gone from the store, unannounced, as an expired row is.
		if err := inner.CompareAndDelete(ctx, "h.example", ver); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Minute) // synctest: past the restraint
		synctest.Wait()
		if err := b.Failure(ctx, "h.example"); err != nil {
			t.Fatal(err)
		}
		st, err := b.Inspect(ctx, "h.example")
		if err != nil || !st.Found || len(st.Failures) != 1 {
			t.Fatalf("after a Failure on a host whose record expired unannounced: %+v, %v; want a record with that failure", st, err)
		}
	})
}

// TestMirrorFutureRecordAnomaly: a record stamped by a fast clock, decided
// on from the mirror without a store read, is reported as such, as it is
// when read from the store.
func TestMirrorFutureRecordAnomaly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		st := &counting{Store: memory.New()}
		fast := newBreaker(t, st.Store, kvbreaker.Settings{Clock: func() time.Time { return time.Now().Add(time.Hour) }, SkipClockCheck: true})
		if err := fast.Failure(ctx, "fast.example"); err != nil {
			t.Fatal(err)
		}
		var seen []string
		b := mirrored(t, st, kvbreaker.Settings{Logger: slog.New(slog.DiscardHandler), Observer: &kvbreaker.Observer{
			RecordAnomaly: func(_ context.Context, e kvbreaker.AnomalyInfo) { seen = append(seen, e.Anomaly) },
		}})
		synctest.Wait()
		// A host without a record is no anomaly.
		if v, err := b.Allow(ctx, "absent.example", time.Time{}); err != nil || v.Decision != kvbreaker.Send {
			t.Fatal(v, err)
		}
		if v, err := b.Allow(ctx, "fast.example", time.Time{}); err != nil || v.Decision != kvbreaker.Send {
			t.Fatal(v, err)
		}
		if n := st.requests(); n != 0 {
			t.Fatalf("%d store requests; want the mirror to decide", n)
		}
		if len(seen) != 1 || seen[0] != "future" {
			t.Fatalf("Observer saw %q; want [%q]", seen, "future")
		}
	})
}

// TestMirrorStalenessByMonotonicClock: with a Settings.Clock of its own (here
// one fixed instant, 30 years on, without a monotonic reading), the mirror
// still judges whether it may decide by the monotonic clock: once synced, it
// decides (judged by that Clock, it would look 30 years stale).
func TestMirrorStalenessByMonotonicClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		st := &counting{Store: memory.New()}
		fixed := time.Now().AddDate(30, 0, 0).Round(0)
		b := mirrored(t, st, kvbreaker.Settings{Clock: func() time.Time { return fixed }})
		synctest.Wait()
		if v, err := b.Allow(ctx, "a.example", time.Time{}); err != nil || v.Decision != kvbreaker.Send {
			t.Fatal(v, err)
		}
		if n := st.requests(); n != 0 {
			t.Fatalf("%d store requests with a synced mirror; want it to decide", n)
		}
	})
}

// scripted is a mirrored Breaker over a memory store whose feed is the
// one the test sends, synced and empty.
func scripted(t *testing.T, s kvbreaker.Settings) (*kvbreaker.Breaker, *counting, func(...driver.Change)) {
	t.Helper()
	st := &counting{Store: memory.New(), script: make(chan driver.Change)}
	b := mirrored(t, st, s)
	send := func(cs ...driver.Change) {
		for _, c := range cs {
			st.script <- c
		}
		synctest.Wait()
	}
	send(driver.Change{Kind: driver.ChangeReset}, driver.Change{Kind: driver.ChangeSynced, At: time.Now()})
	return b, st, send
}

func stale(host string) driver.Change { return driver.Change{Kind: driver.ChangeStale, Key: host} }

// TestMirrorStaleReadsOnce: a Stale makes the next call on its host read
// the store once, and the mirror keeps what it found: the calls after it,
// and calls on other hosts, make no request.
func TestMirrorStaleReadsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b, st, send := scripted(t, kvbreaker.Settings{FailureThreshold: 1})
		// Another worker opens h.example's circuit and deletes
		// gone.example's record; the feed names the keys only.
		if _, err := st.Store.CompareAndSwap(ctx, "h.example", driver.NoVersion, openRecord(time.Now()), time.Hour); err != nil {
			t.Fatal(err)
		}
		send(stale("h.example"), stale("gone.example"), driver.Change{Kind: driver.ChangeSynced, At: time.Now()})
		allow := func(host string, want kvbreaker.Decision, reads int64, when string) {
			t.Helper()
			v, err := b.Allow(ctx, host, time.Time{})
			if err != nil || v.Decision != want {
				t.Fatalf("%s: Allow(%s) = %v %v, want %v", when, host, v.Decision, err, want)
			}
			if n := st.gets.Swap(0); n != reads {
				t.Fatalf("%s: Allow(%s) made %d reads, want %d", when, host, n, reads)
			}
		}
		allow("other.example", kvbreaker.Send, 0, "a host the feed did not name")
		allow("h.example", kvbreaker.Hold, 1, "the first call after its Stale")
		allow("h.example", kvbreaker.Hold, 0, "the second")
		allow("gone.example", kvbreaker.Send, 1, "the first call after its Stale")
		allow("gone.example", kvbreaker.Send, 0, "the second")
		if n := st.writes.Load(); n != 0 {
			t.Fatalf("%d writes", n)
		}
	})
}

// TestMirrorStaleDuringReadNotInstalled: a Stale that arrives while a
// call reads its host's record may report a change the read did not see:
// the mirror does not keep what that read found, and the next call reads
// again and sees the change.
func TestMirrorStaleDuringReadNotInstalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b, st, send := scripted(t, kvbreaker.Settings{FailureThreshold: 1})
		ver, err := st.Store.CompareAndSwap(ctx, "h.example", driver.NoVersion, openRecord(time.Now()), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		send(stale("h.example"), driver.Change{Kind: driver.ChangeSynced, At: time.Now()})
		// After the read found the open record, before it returns,
		// another worker deletes it (the circuit closed) and the feed
		// says so.
		st.afterGet = func(string) {
			st.afterGet = nil
			if err := st.Store.CompareAndDelete(ctx, "h.example", ver); err != nil {
				t.Error(err)
			}
			send(stale("h.example"))
		}
		done := make(chan kvbreaker.Decision)
		go func() {
			v, err := b.Allow(ctx, "h.example", time.Time{})
			if err != nil {
				t.Error(err)
			}
			done <- v.Decision
		}()
		if d := <-done; d != kvbreaker.Hold {
			t.Fatalf("the call that read the open record: %v", d)
		}
		st.gets.Store(0)
		if v, _ := b.Allow(ctx, "h.example", time.Time{}); v.Decision != kvbreaker.Send {
			t.Fatalf("after a Stale that arrived during the read: %v, decided on the read's older record", v.Decision)
		}
		if n := st.gets.Load(); n != 1 {
			t.Fatalf("the call after: %d reads, want 1", n)
		}
	})
}

// TestMirrorStaleOwnWrite: this worker's write stays in its mirror when
// the feed reports it as a Stale (no read); its arrival is measured
// (MirrorLag); once a Synced covers the write, the host is read once.
func TestMirrorStaleOwnWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var ev mirrorEvents
		b, st, send := scripted(t, kvbreaker.Settings{FailureThreshold: 1, Observer: ev.observer()})
		if err := b.Failure(ctx, "h.example"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Millisecond)
		send(stale("h.example"))
		if v, _ := b.Allow(ctx, "h.example", time.Time{}); v.Decision != kvbreaker.Hold || st.gets.Load() != 0 {
			t.Fatalf("after its own write's Stale: %v, %d reads; want Hold from the mirror", v.Decision, st.gets.Load())
		}
		ev.mu.Lock()
		lags := fmt.Sprint(ev.lags)
		ev.mu.Unlock()
		if lags != "[3ms]" {
			t.Fatalf("MirrorLag: %s, want [3ms]", lags)
		}
		time.Sleep(time.Millisecond)
		send(driver.Change{Kind: driver.ChangeSynced, At: time.Now()})
		for i, reads := range []int64{1, 0} {
			if v, _ := b.Allow(ctx, "h.example", time.Time{}); v.Decision != kvbreaker.Hold {
				t.Fatalf("call %d after the Synced: %v", i, v.Decision)
			}
			if n := st.gets.Swap(0); n != reads {
				t.Fatalf("call %d after the Synced: %d reads, want %d", i, n, reads)
			}
		}
	})
}

// TestMirrorStaleCountsTowardsCap: a host the feed said changed counts
// towards MirrorSize until a read finds it absent.
func TestMirrorStaleCountsTowardsCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var ev mirrorEvents
		b, st, send := scripted(t, kvbreaker.Settings{MirrorSize: 2, Observer: ev.observer()})
		send(stale("a.example"), stale("b.example"))
		b.Allow(ctx, "a.example", time.Time{}) // absent: no longer counted
		send(stale("c.example"), driver.Change{Kind: driver.ChangeSynced, At: time.Now()})
		if got := fmt.Sprint(ev.take()); got != "[true:synced]" {
			t.Fatalf("two unknown hosts, one read absent, then a third: Observer.Mirror %s, want healthy", got)
		}
		send(stale("d.example"))
		if got := fmt.Sprint(ev.take()); got != "[false:over_cap]" {
			t.Fatalf("three unknown hosts over a cap of 2: Observer.Mirror %s", got)
		}
		_ = st
	})
}
