package kvbreaker_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/internal/leakcheck"
	"github.com/kvbreaker/kvbreaker/skew"
)

// logBuf is a slog destination tests read back.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// warnings returns the logged lines that mention ClockSkew.
func (l *logBuf) warnings() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for line := range strings.SplitSeq(l.buf.String(), "\n") {
		if strings.Contains(line, "Settings.ClockSkew") {
			out = append(out, line)
		}
	}
	return out
}

func (l *logBuf) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// skewedStore is a memory store whose server clock is off by offset from
// true time (the bubble's), read with resolution res over a round trip of
// before+after.
func skewedStore(offset, res, before, after time.Duration) *skew.ClockStore {
	c := &skew.Clock{Offset: offset}
	return &skew.ClockStore{Store: memory.New(), Clock: c.Now, Resolution: res, Before: before, After: after}
}

// interval is the estimate as [lo, hi].
func interval(o kvbreaker.ClockOffset) (lo, hi time.Duration) {
	return o.Offset - o.Uncertainty, o.Offset + o.Uncertainty
}

// TestClockOffsetEstimate: the estimate's interval holds the true offset,
// for offsets either way, and is as narrow as one round trip plus the
// clock's resolution allows. The round trip is lopsided (3 ms out, 7 ms
// back), so a midpoint guess alone would miss by 2 ms.
func TestClockOffsetEstimate(t *testing.T) {
	const before, after = 3 * time.Millisecond, 7 * time.Millisecond
	for _, tc := range []struct {
		name   string
		offset time.Duration
		res    time.Duration
	}{
		{"redis-ahead", 3200 * time.Millisecond, time.Microsecond},
		{"redis-behind", -3200 * time.Millisecond, time.Microsecond},
		{"redis-exact", 0, time.Microsecond},
		{"date-ahead", 2345 * time.Millisecond, time.Second},
		{"date-behind", -2345 * time.Millisecond, time.Second},
		{"date-small", 400 * time.Millisecond, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBreaker(t, skewedStore(tc.offset, tc.res, before, after), kvbreaker.Settings{SkipClockCheck: true, Logger: slog.New(slog.DiscardHandler)})
				if _, ok := b.ClockOffset(); ok {
					t.Fatal("an estimate before any sample")
				}
				o, err := b.CheckClock(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if got, ok := b.ClockOffset(); !ok || got != o {
					t.Errorf("ClockOffset() = %+v, %v; CheckClock returned %+v", got, ok, o)
				}
				lo, hi := interval(o)
				if tc.offset < lo || tc.offset > hi {
					t.Errorf("estimate %v ± %v = [%v, %v] misses the true offset %v", o.Offset, o.Uncertainty, lo, hi, tc.offset)
				}
				// One sample bounds the offset to round trip + resolution;
				// three at nearly the same instant cannot do better.
				if width, want := hi-lo, before+after+tc.res; width > want+time.Nanosecond {
					t.Errorf("interval width %v, want at most %v (round trip + resolution)", width, want)
				}
				if !o.At.Equal(time.Now()) {
					t.Errorf("At = %v, want the last answer's arrival %v", o.At, time.Now())
				}
			})
		})
	}
}

// TestClockOffsetNarrowsBelowResolution: samples of a one-second clock
// taken at different fractions of a second narrow the estimate below the
// resolution, and it keeps holding the true offset. A single sample is the
// control: it spans the whole second plus the round trip.
func TestClockOffsetNarrowsBelowResolution(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const offset = 2345 * time.Millisecond
		rtt := 10 * time.Millisecond
		b := newBreaker(t, skewedStore(offset, time.Second, rtt/2, rtt/2), kvbreaker.Settings{SkipClockCheck: true, Logger: slog.New(slog.DiscardHandler)})
		o, err := b.CheckClock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		// A burst of three samples 10 ms apart narrows it by those 20 ms
		// at most.
		if lo, hi := interval(o); hi-lo < 980*time.Millisecond {
			t.Fatalf("one burst: width %v, want nearly the whole second (control)", hi-lo)
		}
		for range 4 {
			time.Sleep(230 * time.Millisecond) // another fraction of a second
			if o, err = b.CheckClock(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		lo, hi := interval(o)
		if offset < lo || offset > hi {
			t.Errorf("estimate [%v, %v] misses the true offset %v", lo, hi, offset)
		}
		// The samples' phases are about 260 ms apart: that is what the
		// narrowest pair can leave.
		if hi-lo > 300*time.Millisecond {
			t.Errorf("after samples across the second: width %v, want at most 300ms", hi-lo)
		}
		t.Logf("estimate %v ± %v (true %v)", o.Offset, o.Uncertainty, offset)
	})
}

// TestClockOffsetSteppedClockResets: when the worker's clock steps (NTP
// corrects it), samples from before no longer agree with the new ones; the
// estimate follows the new offset instead of an empty intersection.
func TestClockOffsetSteppedClockResets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var step atomic.Int64
		worker := func() time.Time { return time.Now().Add(time.Duration(step.Load())) }
		b := newBreaker(t, skewedStore(0, time.Microsecond, time.Millisecond, time.Millisecond),
			kvbreaker.Settings{SkipClockCheck: true, Clock: worker, Logger: slog.New(slog.DiscardHandler)})
		if _, err := b.CheckClock(t.Context()); err != nil {
			t.Fatal(err)
		}
		step.Store(int64(-5 * time.Second)) // the worker's clock falls 5 s behind
		o, err := b.CheckClock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if lo, hi := interval(o); 5*time.Second < lo || 5*time.Second > hi {
			t.Errorf("after the step: [%v, %v], want it to hold 5s", lo, hi)
		}
	})
}

// TestClockWarning: the Breaker warns once when the estimate proves the
// offset beyond ClockSkew, naming the setting and the fix; not when the
// offset is within it, nor when it may be beyond but is not proven.
func TestClockWarning(t *testing.T) {
	const rtt = 10 * time.Millisecond
	for _, tc := range []struct {
		name   string
		offset time.Duration
		res    time.Duration
		skew   time.Duration
		want   string // a fragment of the warning; "" for none
	}{
		{"behind", 3200 * time.Millisecond, time.Microsecond, 0, "this worker's clock is 3.2s ± 5ms behind the store's, more than Settings.ClockSkew (1s) assumes"},
		{"ahead", -3200 * time.Millisecond, time.Microsecond, 0, "this worker's clock is 3.2s ± 5ms ahead of the store's"},
		{"raised-skew", 3200 * time.Millisecond, time.Microsecond, 4 * time.Second, ""},
		{"within", 900 * time.Millisecond, time.Microsecond, 0, ""},
		{"within-behind", -900 * time.Millisecond, time.Microsecond, 0, ""},
		// 1.3 s off, but a one-second clock read in one burst allows
		// [0.99 s, 1.99 s]: not proven beyond 1 s.
		{"unproven", 1300 * time.Millisecond, time.Second, 0, ""},
		{"proven-coarse", 3300 * time.Millisecond, time.Second, 0, "behind the store's, more than Settings.ClockSkew (1s) assumes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs logBuf
				b := newBreaker(t, skewedStore(tc.offset, tc.res, rtt/2, rtt/2), kvbreaker.Settings{SkipClockCheck: true, ClockSkew: tc.skew, Logger: logs.logger()})
				for range 3 {
					if _, err := b.CheckClock(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
				got := logs.warnings()
				switch {
				case tc.want == "" && len(got) > 0:
					t.Errorf("warned %q; want no warning", got)
				case tc.want != "" && len(got) != 1:
					t.Errorf("%d warnings %q; want exactly one", len(got), got)
				case tc.want != "" && (!strings.Contains(got[0], tc.want) || !strings.Contains(got[0], "fix the clock (NTP) or raise ClockSkew")):
					t.Errorf("warning %q; want it to contain %q and the fix", got[0], tc.want)
				}
			})
		})
	}
}

// TestClockWarningOnceProven: the 1.3 s offset the single burst could not
// prove is proven once samples at other fractions of a second narrow the
// estimate; the warning then comes, once.
func TestClockWarningOnceProven(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs logBuf
		b := newBreaker(t, skewedStore(1300*time.Millisecond, time.Second, 5*time.Millisecond, 5*time.Millisecond),
			kvbreaker.Settings{SkipClockCheck: true, Logger: logs.logger()})
		if _, err := b.CheckClock(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := logs.warnings(); len(got) != 0 {
			t.Fatalf("warned on an unproven offset: %q", got)
		}
		for range 6 {
			time.Sleep(270 * time.Millisecond)
			if _, err := b.CheckClock(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		o, _ := b.ClockOffset()
		if lo, _ := interval(o); lo <= time.Second {
			t.Fatalf("estimate %v ± %v does not prove more than 1s: the test needs other phases", o.Offset, o.Uncertainty)
		}
		if got := logs.warnings(); len(got) != 1 {
			t.Errorf("%d warnings %q; want exactly one", len(got), got)
		}
	})
}

// TestCheckClockUnsupported: a store that cannot show its clock (memory)
// gives ErrUnsupported naming the store type, and no estimate; through
// Prefixed, a store that can is still checked.
func TestCheckClockUnsupported(t *testing.T) {
	b := newBreaker(t, memory.New(), kvbreaker.Settings{})
	_, err := b.CheckClock(t.Context())
	if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "*memory.Store") {
		t.Errorf("CheckClock on memory: %v; want ErrUnsupported naming *memory.Store", err)
	}
	if _, ok := b.ClockOffset(); ok {
		t.Error("an estimate without a sampler")
	}
	synctest.Test(t, func(t *testing.T) {
		p, err := kvbreaker.Prefixed(skewedStore(2*time.Second, time.Microsecond, 0, 0), "fleet-a/")
		if err != nil {
			t.Fatal(err)
		}
		b := newBreaker(t, p, kvbreaker.Settings{SkipClockCheck: true, Logger: slog.New(slog.DiscardHandler)})
		o, err := b.CheckClock(t.Context())
		if err != nil || o.Offset < 2*time.Second-time.Microsecond || o.Offset > 2*time.Second+time.Microsecond {
			t.Errorf("through Prefixed: %+v, %v; want 2s", o, err)
		}
	})
}

// TestClockSettings: the background check's settings are validated.
func TestClockSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    kvbreaker.Settings
		want string
	}{
		{"negative", kvbreaker.Settings{ClockCheckInterval: -time.Second}, "ClockCheckInterval is -1s: set a positive duration, or zero for the default 10m0s"},
		{"both", kvbreaker.Settings{ClockCheckInterval: time.Minute, SkipClockCheck: true}, "ClockCheckInterval is 1m0s but SkipClockCheck turns the checks off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := kvbreaker.New(memory.New(), tc.s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v; want an error containing %q", err, tc.want)
			}
		})
	}
	for _, s := range []kvbreaker.Settings{{ClockCheckInterval: time.Minute}, {SkipClockCheck: true}} {
		if _, err := kvbreaker.New(memory.New(), s); err != nil {
			t.Errorf("New(%+v): %v", s, err)
		}
	}
}

// gatedClock is a skewed store whose SampleClock waits for a release (or
// its context's end) before answering, and counts its calls.
type gatedClock struct {
	*skew.ClockStore
	release  chan struct{}
	calls    atomic.Int32 // SampleClock calls begun
	returned atomic.Int32 // … and ended
	running  atomic.Int32
	most     atomic.Int32 // the most ever running at once
}

func newGated(offset time.Duration) *gatedClock {
	// No round-trip delay: a released sample then ends without another
	// timer, so synctest.Wait sees it done.
	return &gatedClock{ClockStore: skewedStore(offset, time.Microsecond, 0, 0), release: make(chan struct{})}
}

func (g *gatedClock) SampleClock(ctx context.Context) (time.Time, time.Duration, error) {
	g.calls.Add(1)
	defer g.returned.Add(1)
	n := g.running.Add(1)
	defer g.running.Add(-1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
	select {
	case <-g.release:
	case <-ctx.Done():
		return time.Time{}, 0, ctx.Err()
	}
	return g.ClockStore.SampleClock(ctx)
}

// TestBackgroundClockCheck: the first store call starts a check without
// waiting for it; calls while it runs start no other, even once another is
// due; it reports through the Observer and the Logger; the next check waits
// for the interval, by the monotonic clock.
func TestBackgroundClockCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		g := newGated(3 * time.Second)
		var logs logBuf
		var ev events
		obs := ev.observer(time.Time{})
		var offsets []kvbreaker.ClockOffset
		var omu sync.Mutex
		obs.ClockOffset = func(_ context.Context, o kvbreaker.ClockOffset) {
			omu.Lock()
			offsets = append(offsets, o)
			omu.Unlock()
		}
		// A worker clock 10 h behind true time, which later steps back
		// another hour: a check scheduled by it would fall due an hour
		// late.
		var step atomic.Int64
		worker := func() time.Time { return time.Now().Add(-10*time.Hour + time.Duration(step.Load())) }
		b := newBreaker(t, g, kvbreaker.Settings{ClockCheckInterval: time.Minute, CallTimeout: 10 * time.Minute,
			Observer: obs, Logger: logs.logger(), Clock: worker})
		defer b.Close(ctx)

		start := time.Now()
		mustAllow(t, b, time.Time{}) // starts the check; must not wait for it
		synctest.Wait()
		if time.Since(start) != 0 {
			t.Fatalf("Allow took %v of bubble time: it waited for the clock check", time.Since(start))
		}
		if g.calls.Load() != 1 {
			t.Fatalf("%d samples after the first Allow, want 1 (running in the background)", g.calls.Load())
		}
		time.Sleep(2 * time.Minute) // another check is due, but one is still running
		for range 5 {
			mustAllow(t, b, time.Time{})
			if err := b.Failure(ctx, "other.example"); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if g.calls.Load() != 1 || g.most.Load() != 1 {
			t.Fatalf("%d samples, %d at once, while one was running; want 1, 1", g.calls.Load(), g.most.Load())
		}
		if _, ok := b.ClockOffset(); ok {
			t.Fatal("an estimate before the sample answered")
		}
		close(g.release) // every sample answers from now on
		synctest.Wait()
		o, ok := b.ClockOffset()
		if !ok {
			t.Fatal("no estimate after the background sample")
		}
		// The server reads true time + 3 s. The sample took the 2 min it
		// was held: that round trip is the interval's width.
		if lo, hi := interval(o); lo > 10*time.Hour+3*time.Second || hi < 10*time.Hour+3*time.Second || hi-lo > 2*time.Minute+time.Microsecond+1 {
			t.Errorf("estimate [%v, %v], want it to hold 10h0m3s and be at most the 2m round trip wide", lo, hi)
		}
		omu.Lock()
		if len(offsets) != 1 || offsets[0] != o {
			t.Errorf("Observer.ClockOffset got %+v; want one call with %+v", offsets, o)
		}
		omu.Unlock()
		var sampled []string
		for _, e := range ev.take() {
			if strings.Contains(e, "sample_clock") {
				sampled = append(sampled, e)
			}
		}
		if len(sampled) != 1 || sampled[0] != "store sample_clock  ok" {
			t.Errorf("StoreCall events for the sample: %q; want one ok", sampled)
		}
		if w := logs.warnings(); len(w) != 1 || !strings.Contains(w[0], "behind the store's") {
			t.Errorf("warnings %q; want one (the worker's clock is 10 h behind)", w)
		}
		step.Store(int64(-time.Hour))

		// The first check began 2 min ago; the next fell due a minute
		// after that (by the monotonic clock, which no step moves),
		// while the first still ran: the next call starts it.
		mustAllow(t, b, time.Time{})
		synctest.Wait()
		if g.calls.Load() != 2 {
			t.Fatalf("%d samples; want a second one, due since the first began a minute ago", g.calls.Load())
		}
		mustAllow(t, b, time.Time{})
		synctest.Wait()
		if g.calls.Load() != 2 {
			t.Fatalf("%d samples; want none before the interval passes", g.calls.Load())
		}
		time.Sleep(time.Minute)
		mustAllow(t, b, time.Time{})
		synctest.Wait()
		if g.calls.Load() != 3 {
			t.Fatalf("%d samples; want a third after the interval", g.calls.Load())
		}
		if o, _ := b.ClockOffset(); o.Offset-o.Uncertainty > 11*time.Hour+3*time.Second || o.Offset+o.Uncertainty < 11*time.Hour+3*time.Second {
			t.Errorf("after the step: %v ± %v, want it to hold 11h0m3s", o.Offset, o.Uncertainty)
		}
		if w := logs.warnings(); len(w) != 1 {
			t.Errorf("%d warnings after three samples; want still one", len(w))
		}
	})
}

// TestClockCheckNotAutomatic: no background sample with SkipClockCheck, or
// over an in-process store, or one without a clock; CheckClock still works
// where there is a clock.
func TestClockCheckNotAutomatic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGated(0)
		close(g.release)
		b := newBreaker(t, g, kvbreaker.Settings{SkipClockCheck: true})
		mustAllow(t, b, time.Time{})
		synctest.Wait()
		if n := g.calls.Load(); n != 0 {
			t.Errorf("SkipClockCheck: %d samples", n)
		}
		if _, err := b.CheckClock(t.Context()); err != nil || g.calls.Load() != 3 {
			t.Errorf("CheckClock with SkipClockCheck: %v, %d samples; want 3", err, g.calls.Load())
		}

		inproc := &inProcessClock{Store: memory.New()}
		b = newBreaker(t, inproc, kvbreaker.Settings{})
		mustAllow(t, b, time.Time{})
		synctest.Wait()
		if n := inproc.calls.Load(); n != 0 {
			t.Errorf("in-process store: %d background samples", n)
		}
		if _, err := b.CheckClock(t.Context()); err != nil || inproc.calls.Load() != 3 {
			t.Errorf("CheckClock in-process: %v, %d samples; want 3", err, inproc.calls.Load())
		}

		// Negative control: the same gated store without SkipClockCheck
		// samples on the first Allow.
		g2 := newGated(0)
		close(g2.release)
		b = newBreaker(t, g2, kvbreaker.Settings{})
		mustAllow(t, b, time.Time{})
		synctest.Wait()
		if n := g2.calls.Load(); n != 1 {
			t.Errorf("control: %d samples, want 1", n)
		}
	})
}

// inProcessClock is the memory store (in-process) with a clock to read.
type inProcessClock struct {
	*memory.Store
	calls atomic.Int32
}

func (s *inProcessClock) SampleClock(context.Context) (time.Time, time.Duration, error) {
	s.calls.Add(1)
	return time.Now(), time.Microsecond, nil
}

// TestCloseEndsClockCheck: Close cancels a running background sample and
// returns only once it has ended; after Close no call starts another.
func TestCloseEndsClockCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGated(0)
		b := newBreaker(t, g, kvbreaker.Settings{ClockCheckInterval: time.Second})
		mustAllow(t, b, time.Time{})
		synctest.Wait()
		if g.calls.Load() != 1 || g.returned.Load() != 0 {
			t.Fatalf("calls %d, returned %d; want a sample blocked", g.calls.Load(), g.returned.Load())
		}
		start := time.Now()
		if err := b.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		if g.returned.Load() != 1 {
			t.Errorf("Close returned while the sample was still running")
		}
		if time.Since(start) != 0 {
			t.Errorf("Close took %v: it waited for the sample's timeout instead of cancelling it", time.Since(start))
		}
		time.Sleep(time.Minute)
		mustAllow(t, b, time.Time{}) // misuse after Close must not start a sample
		synctest.Wait()
		if g.calls.Load() != 1 {
			t.Errorf("a sample started after Close")
		}
	})
}

// TestCloseLeavesNoGoroutine: in real time, a Breaker whose background
// sample is stuck leaves no goroutine after Close (leakcheck); the same
// Breaker without Close is caught (negative control).
func TestCloseLeavesNoGoroutine(t *testing.T) {
	if err := leakcheck.Find(2 * time.Second); err != nil {
		t.Skipf("goroutines of other tests still running: %v", err)
	}
	g := newGated(0)
	b := newBreaker(t, g, kvbreaker.Settings{})
	mustAllow(t, b, time.Time{})
	for g.calls.Load() == 0 {
		time.Sleep(time.Millisecond) // waiting for the goroutine to start, not for logic
	}
	if err := leakcheck.Find(50 * time.Millisecond); err == nil {
		t.Fatal("control: leakcheck does not see the running sample")
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Close has waited for the sample; the grace covers only the
	// goroutine's exit after its last deferred call.
	if err := leakcheck.Find(time.Second); err != nil {
		t.Errorf("after Close: %v", err)
	}
}

// TestBackgroundCheckReadsClockOnCaller: the background sample never reads
// Settings.Clock from its own goroutine, so a clock that is safe only on the
// goroutine calling the Breaker (internal/faultfleet's per-worker clocks)
// stays safe. The clock below reads a plain variable the test goroutine
// writes while the sample runs; under -race a read from the sample's
// goroutine is reported (reading the clock there made faultfleet's tests
// fail under -race).
func TestBackgroundCheckReadsClockOnCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGated(time.Second)
		var shift time.Duration // written by this goroutine only, unsynchronised
		b := newBreaker(t, g, kvbreaker.Settings{Clock: func() time.Time { return time.Now().Add(shift) }, Logger: slog.New(slog.DiscardHandler)})
		mustAllow(t, b, time.Time{})
		synctest.Wait()
		close(g.release)
		shift = time.Minute // concurrent with the sample's end
		synctest.Wait()
		if _, ok := b.ClockOffset(); !ok || g.returned.Load() != 1 {
			t.Fatalf("the background sample did not complete")
		}
		if err := b.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}
