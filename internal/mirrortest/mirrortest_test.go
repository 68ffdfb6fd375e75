package mirrortest_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/mirrortest"
	"github.com/kvbreaker/kvbreaker/internal/tbtest"
)

// run runs fn and returns its first failure.
func run(t *testing.T, fn func(testing.TB)) string { return tbtest.FirstFailure(t, fn) }

// How a feed misbehaves once broken.
type mode int

const (
	// honest: Lost, then a new snapshot (the memory store's Follow again).
	honest mode = iota
	// silent: every later Put and Delete dropped, Synced going on.
	silent
	// resume: Lost, then every later Put and Delete dropped, Synced
	// going on: a resume past a gap, with no new snapshot.
	resume
)

var errBroken = errors.New("feed broken by the test")

// feed is one Breaker's view of a shared memory store, whose Follow can be
// broken.
type feed struct {
	*memory.Store
	mode mode
	// drop: Puts and Deletes of hosts containing it are dropped from the
	// start (a feed that loses writes without a word).
	drop string
	// slow, delay: Puts of hosts containing slow arrive delay late (the
	// feed's goroutine waits: a slow network, a slow store).
	slow  string
	delay time.Duration

	mu       sync.Mutex
	cancel   context.CancelFunc
	dropping bool
	lose     bool // send Lost before the next change
}

func (s *feed) Follow(ctx context.Context, prefix string, hb time.Duration, fn func(driver.Change)) error {
	wrapped := func(c driver.Change) {
		s.mu.Lock()
		lose, dropping := s.lose, s.dropping
		s.lose = false
		s.mu.Unlock()
		if lose {
			fn(driver.Change{Kind: driver.ChangeLost, Err: errBroken})
		}
		if (c.Kind == driver.ChangePut || c.Kind == driver.ChangeDelete) && (dropping || s.drop != "" && strings.Contains(c.Key, s.drop)) {
			return
		}
		if c.Kind == driver.ChangePut && s.slow != "" && strings.Contains(c.Key, s.slow) {
			time.Sleep(s.delay)
		}
		fn(c)
	}
	for {
		ictx, cancel := context.WithCancel(ctx)
		s.mu.Lock()
		s.cancel = cancel
		s.mu.Unlock()
		err := s.Store.Follow(ictx, prefix, hb, wrapped)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(err, context.Canceled) {
			return err
		}
		fn(driver.Change{Kind: driver.ChangeLost, Err: errBroken})
	}
}

// brk breaks the feed as its mode says.
func (s *feed) brk() {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.mode {
	case honest:
		s.cancel()
	case silent:
		s.dropping = true
	case resume:
		s.dropping, s.lose = true, true
	}
}

var _ driver.Follower = (*feed)(nil)

func fleet(t testing.TB, n int, mk func(*memory.Store) *feed, wait time.Duration) (*mirrortest.Fleet, []*feed) {
	st := memory.New()
	t.Cleanup(func() { st.Close() })
	var feeds []*feed
	var stores []driver.Store
	for range n {
		f := mk(st)
		feeds = append(feeds, f)
		stores = append(stores, f)
	}
	s := kvbreaker.Settings{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: time.Hour, MirrorStaleness: 400 * time.Millisecond}
	return mirrortest.StartWait(t, stores, s, wait), feeds
}

func breakAndChange(t testing.TB, m mode, wait time.Duration) mirrortest.BreakReport {
	return breakAndChangeSlow(t, m, wait, 0)
}

// breakAndChangeSlow is breakAndChange with the feed of breaker 3, never
// broken, delivering every Put slow late.
func breakAndChangeSlow(t testing.TB, m mode, wait, slow time.Duration) mirrortest.BreakReport {
	n := 0
	f, feeds := fleet(t, 4, func(st *memory.Store) *feed {
		fd := &feed{Store: st, mode: m}
		if n++; n == 4 && slow > 0 {
			fd.slow, fd.delay = "h2", slow
		}
		return fd
	}, wait)
	return f.BreakAndChange(t, mirrortest.Break{
		Host:   "h2.example",
		Writer: 0,
		Broken: []int{1, 2},
		Do: func(context.Context) error {
			feeds[1].brk()
			feeds[2].brk()
			return nil
		},
	})
}

func TestBreakAndChange(t *testing.T) {
	var rep mirrortest.BreakReport
	if msg := run(t, func(t testing.TB) { rep = breakAndChange(t, honest, mirrortest.DefaultWait) }); msg != "" {
		t.Fatalf("an honest feed: %s", msg)
	}
	t.Log(rep)
	if rep.StoreDecisions != 4 || rep.MirrorDecisions != 2 {
		t.Errorf("counted %d decisions from the store and %d from the mirror, want 4 and 2", rep.StoreDecisions, rep.MirrorDecisions)
	}
	// A feed never broken that delivers the opening write late (as a
	// loaded machine's does) answers Send from its mirror until it
	// arrives: not a failure.
	if msg := run(t, func(t testing.TB) { breakAndChangeSlow(t, honest, mirrortest.DefaultWait, 100*time.Millisecond) }); msg != "" {
		t.Errorf("an honest fleet with one slow feed never broken: %s", msg)
	}

	// Negative controls: a feed that drops changes without a word is
	// never reported lost; one that resumes past the gap after Lost,
	// without a new snapshot, leaves a mirror that answers from before the
	// change.
	if msg := run(t, func(t testing.TB) { breakAndChange(t, silent, time.Second) }); !strings.Contains(msg, "did not report it") {
		t.Errorf("a feed that drops changes silently: failure %q, want one saying the mirror did not report the break", msg)
	}
	if msg := run(t, func(t testing.TB) { breakAndChange(t, resume, time.Second) }); !strings.Contains(msg, "decided send from its mirror after the resync") {
		t.Errorf("a feed that resumes past its gap: failure %q, want one about a Send from the mirror", msg)
	}
}

func TestPropagate(t *testing.T) {
	var rep mirrortest.PropagationReport
	if msg := run(t, func(t testing.TB) {
		f, _ := fleet(t, 4, func(st *memory.Store) *feed { return &feed{Store: st} }, mirrortest.DefaultWait)
		rep = f.Propagate(t, 0, "h.example", 8)
	}); msg != "" {
		t.Fatalf("an honest feed: %s", msg)
	}
	t.Log(rep)
	if len(rep.Arrivals) != 3 || rep.LagSamples < 20 {
		t.Errorf("%d arrivals from %d feed delays, want 3 from at least 20", len(rep.Arrivals), rep.LagSamples)
	}

	// Negative controls: the other Breakers' feeds lose the opening
	// write, or deliver it 50 ms late, far past the delay the writes
	// before measured.
	others := func(set func(*feed)) func(*memory.Store) *feed {
		var n atomic.Int64
		return func(st *memory.Store) *feed {
			fd := &feed{Store: st}
			if n.Add(1) > 1 {
				set(fd)
			}
			return fd
		}
	}
	msg := run(t, func(t testing.TB) {
		f, _ := fleet(t, 4, others(func(fd *feed) { fd.drop = "-r" }), time.Second)
		f.Propagate(t, 0, "h.example", 8)
	})
	if !strings.Contains(msg, "no Hold within") {
		t.Errorf("feeds that lose the opening write: failure %q, want one saying no Hold came", msg)
	}
	msg = run(t, func(t testing.TB) {
		f, _ := fleet(t, 4, others(func(fd *feed) { fd.slow, fd.delay = "-r", 50*time.Millisecond }), mirrortest.DefaultWait)
		f.Propagate(t, 0, "h.example", 8)
	})
	if !strings.Contains(msg, "answered Send more than") {
		t.Errorf("feeds that deliver the opening write late: failure %q, want one about a late Send", msg)
	}
}
