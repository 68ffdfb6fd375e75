package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// recorder collects a feed's changes.
type recorder struct {
	mu sync.Mutex
	cs []driver.Change
}

func (r *recorder) add(c driver.Change) {
	r.mu.Lock()
	r.cs = append(r.cs, c)
	r.mu.Unlock()
}

func (r *recorder) take() []driver.Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs := r.cs
	r.cs = nil
	return cs
}

func describe(cs []driver.Change) []string {
	var out []string
	for _, c := range cs {
		switch c.Kind {
		case driver.ChangePut:
			out = append(out, fmt.Sprintf("put %s=%s", c.Key, c.Value))
		case driver.ChangeDelete:
			out = append(out, "delete "+c.Key)
		default:
			out = append(out, c.Kind.String())
		}
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// follow runs s.Follow in a goroutine of the bubble; stop ends it and
// returns its error.
func follow(s *Store, prefix string, hb time.Duration, fn func(driver.Change)) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Follow(ctx, prefix, hb, fn) }()
	return func() error { cancel(); return <-errc }
}

// TestFollowSnapshotThenChanges: the feed is the snapshot of the prefix's
// live keys, then every write, deletion and expiry under the prefix in
// commit order, with Synced every heartbeat; keys outside the prefix never
// arrive.
func TestFollowSnapshotThenChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := New()
		defer s.Close()
		v1, _ := s.CompareAndSwap(ctx, "p/a", driver.NoVersion, []byte("1"), time.Hour)
		s.CompareAndSwap(ctx, "q/a", driver.NoVersion, []byte("x"), time.Hour)
		gone, _ := s.CompareAndSwap(ctx, "p/gone", driver.NoVersion, []byte("g"), time.Hour)
		s.CompareAndDelete(ctx, "p/gone", gone)
		var r recorder
		start := time.Now()
		stop := follow(s, "p/", 100*time.Millisecond, r.add)
		synctest.Wait()
		got := r.take()
		if want := []string{"reset", "put p/a=1", "synced"}; !equal(describe(got), want) {
			t.Fatalf("snapshot: %q, want %q", describe(got), want)
		}
		if got[1].Version != v1 || !got[2].At.Equal(start) {
			t.Fatalf("snapshot version %d (want %d), synced at %v (want %v)", got[1].Version, v1, got[2].At, start)
		}

		v2, _ := s.CompareAndSwap(ctx, "p/a", v1, []byte("2"), time.Hour)
		s.CompareAndSwap(ctx, "q/b", driver.NoVersion, []byte("x"), time.Hour)
		s.CompareAndSwap(ctx, "p/b", driver.NoVersion, []byte("b"), time.Second)
		s.CompareAndDelete(ctx, "p/a", v2)
		synctest.Wait()
		if want := []string{"put p/a=2", "put p/b=b", "delete p/a"}; !equal(describe(r.take()), want) {
			t.Fatal("changes: want", want)
		}
		// p/b expires at 1 s; the sweep frees it (and the feed says so)
		// within about a second after; heartbeats meanwhile.
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		got = r.take()
		var kinds []string
		deleted := false
		for _, c := range got {
			if c.Kind == driver.ChangeDelete && c.Key == "p/b" {
				deleted = true
			}
			kinds = append(kinds, c.Kind.String())
		}
		if !deleted {
			t.Fatalf("expiry not delivered: %q", kinds)
		}
		if n := len(got) - 1; n < 24 {
			t.Fatalf("%d Synced in 2.5 s at a 100 ms heartbeat: %q", n, kinds)
		}
		if err := stop(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Follow after its context ended: %v", err)
		}
	})
}

// TestFollowSyncedCoversEveryEarlierWrite: a Synced's At is no earlier than
// a write the follower has not yet received.
func TestFollowSyncedCoversEveryEarlierWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := New()
		defer s.Close()
		var mu sync.Mutex
		seen := map[string]bool{}
		written := map[string]time.Time{}
		var bad []string
		stop := follow(s, "", time.Millisecond, func(c driver.Change) {
			mu.Lock()
			defer mu.Unlock()
			switch c.Kind {
			case driver.ChangePut:
				seen[c.Key] = true
			case driver.ChangeSynced:
				for k, at := range written {
					if at.Before(c.At) && !seen[k] {
						bad = append(bad, k)
					}
				}
			}
		})
		for i := range 200 {
			k := fmt.Sprint(i)
			mu.Lock()
			written[k] = time.Now()
			mu.Unlock()
			s.CompareAndSwap(ctx, k, driver.NoVersion, nil, time.Hour)
			time.Sleep(time.Duration(i%3) * time.Millisecond)
		}
		synctest.Wait()
		stop()
		if len(bad) > 0 {
			t.Fatalf("Synced past undelivered writes: %v", bad)
		}
	})
}

// TestFollowOverflowLosesAndResyncs: writers do not wait for a follower
// that stopped reading; past its queue it gets Lost, then a snapshot of
// what the store holds now.
func TestFollowOverflowLosesAndResyncs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := New(WithFollowQueue(8))
		defer s.Close()
		var r recorder
		release := make(chan struct{})
		blocked := false
		stop := follow(s, "", time.Hour, func(c driver.Change) {
			r.add(c)
			if c.Kind == driver.ChangeSynced && !blocked {
				blocked = true
				<-release // a follower that stops reading
			}
		})
		synctest.Wait()
		v := driver.NoVersion
		for i := range 20 { // more than the queue holds; none of them waits
			v, _ = s.CompareAndSwap(ctx, "k", v, fmt.Append(nil, i), time.Hour)
		}
		close(release)
		synctest.Wait()
		got := describe(r.take())
		want := []string{"reset", "synced", "lost", "reset", "put k=19", "synced"}
		if !equal(got, want) {
			t.Fatalf("feed %q, want %q", got, want)
		}
		stop()
	})
}

// TestFollowEndsOnClose: Close ends every Follow with ErrClosed; the store
// can be followed again afterwards.
func TestFollowEndsOnClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		errc := make(chan error, 2)
		for range 2 {
			go func() { errc <- s.Follow(context.Background(), "", time.Second, func(driver.Change) {}) }()
		}
		synctest.Wait()
		s.Close()
		for range 2 {
			if err := <-errc; !errors.Is(err, ErrClosed) {
				t.Fatalf("Follow after Close: %v", err)
			}
		}
		var r recorder
		stop := follow(s, "", time.Second, r.add)
		synctest.Wait()
		if got := describe(r.take()); !equal(got, []string{"reset", "synced"}) {
			t.Fatalf("after Close, a new Follow: %q", got)
		}
		stop()
		s.Close()
	})
}

// TestFollowRejects: a heartbeat that is not positive, a nil function and
// an ended context are errors, not a feed.
func TestFollowRejects(t *testing.T) {
	s := New()
	ctx := context.Background()
	if err := s.Follow(ctx, "", 0, func(driver.Change) {}); err == nil {
		t.Error("heartbeat 0 accepted")
	}
	if err := s.Follow(ctx, "", time.Second, nil); err == nil {
		t.Error("nil fn accepted")
	}
	c, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Follow(c, "", time.Second, func(driver.Change) {}); !errors.Is(err, context.Canceled) {
		t.Errorf("ended context: %v", err)
	}
}
