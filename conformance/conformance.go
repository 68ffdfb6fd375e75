package conformance

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/core"
)

// Options tune the suite. The zero value of every field means its default.
type Options struct {
	// Goroutines race through CompareAndSwap in the linearizability case.
	// Default 8.
	Goroutines int
	// Iterations is how many read-then-swap rounds each goroutine makes in
	// the linearizability case. Default 40. The check has no false
	// positives, but may miss a race that did not happen: raise it (and run
	// under -race) for more confidence.
	Iterations int
	// ExpiryTTL is the TTL the expiry cases write with. Default
	// max(Traits().Expiry.MinTTL, 2 s).
	ExpiryTTL time.Duration
	// ClockSkew is the fleet's clock-skew bound δ, used by the Breaker-level
	// cases and to report the TTLMargin a fleet needs. Default
	// core.DefaultClockSkew.
	ClockSkew time.Duration
	// SkipSlow skips the cases that wait in real time (expiry, staleness)
	// when the harness cannot advance the backend's clock. Run sets it under
	// go test -short.
	SkipSlow bool
	// Timeout bounds each case, within the caller's context. Default 2 min
	// plus the waits the store's declared traits force (minimum TTL, read
	// staleness).
	Timeout time.Duration
	// Trials is how many randomised runs per margin the simulated-time
	// margin case makes. Default 200.
	Trials int
}

func (o Options) withDefaults(t core.Traits) Options {
	if o.Goroutines <= 0 {
		o.Goroutines = 8
	}
	if o.Iterations <= 0 {
		o.Iterations = 40
	}
	if o.ExpiryTTL <= 0 {
		o.ExpiryTTL = max(t.Expiry.MinTTL, 2*time.Second)
	}
	if o.ClockSkew <= 0 {
		o.ClockSkew = core.DefaultClockSkew
	}
	if o.Trials <= 0 {
		o.Trials = 200
	}
	if o.Timeout <= 0 {
		o.Timeout = 2*time.Minute + 2*max(o.ExpiryTTL, t.Expiry.MinTTL) + t.Expiry.Granularity + t.Expiry.Late + 8*t.ReadStaleness
	}
	return o
}

// Run runs the whole suite against the stores newHarness makes, each case as
// a named subtest (so -run selects one) with a deadline from t.Context(). It
// calls newHarness once and closes the harness when the test ends.
//
// The store's Traits are the declaration the suite holds it to: a store that
// is not Atomic skips the cases that need a real compare (with a t.Skipf
// naming the trait) but must still do what it declares; a store that claims
// atomic compare-and-swap and loses an update fails. Cases that wait in real
// time are skipped under -short unless the harness implements TimeAdvancer.
func Run(t *testing.T, newHarness HarnessMaker) {
	t.Helper()
	RunOptions(t, newHarness, Options{SkipSlow: testing.Short()})
}

// RunOptions is Run with options.
func RunOptions(t *testing.T, newHarness HarnessMaker, opts Options) {
	t.Helper()
	h, err := newHarness(t.Context(), t)
	if err != nil {
		t.Fatalf("conformance: making the harness: %v", err)
	}
	if h == nil {
		t.Fatal("conformance: HarnessMaker returned a nil Harness and no error")
	}
	t.Cleanup(h.Close)
	s0, err := h.MakeStore(t.Context())
	if err == nil && s0 == nil {
		err = errors.New("returned a nil store and no error")
	}
	if err != nil {
		t.Fatalf("conformance: MakeStore: %v", err)
	}
	traits := s0.Traits()
	opts = opts.withDefaults(traits)
	rep := newReport(traits, opts)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if why := c.skip(traits, h, opts); why != "" {
				rep.add(Result{Case: c.name, Promise: c.promise, Skipped: why})
				t.Skip(why)
			}
			e, err := newEnv(t.Context(), h, &s0, traits, opts, rep)
			if err != nil {
				t.Fatalf("conformance: MakeStore: %v", err)
			}
			e.t = t
			defer e.cancel()
			c.run(e.ctx, e)
			res := e.result(c)
			rep.add(res)
			for _, p := range res.Problems {
				t.Error(p)
			}
		})
	}
	t.Run("report", func(t *testing.T) { t.Log("\n" + rep.String()) })
}

// Check runs the suite's cases against the stores h makes and returns every
// violation, joined (errors.Join), each naming the promise it breaks, or nil.
// It is the form of Run that needs no *testing.T: `kvbreaker check` uses it
// on live stores. Check does not close h.
func Check(ctx context.Context, h Harness) error {
	_, err := Measure(ctx, h, Options{})
	return err
}

// Measure is Check with options, also returning what it measured: per-case
// results, observed expiry and staleness, round-trip times, and the
// TTLMargin the store needs. The error is the joined violations, as Check
// returns them; a Report is returned even when there are violations.
func Measure(ctx context.Context, h Harness, opts Options) (*Report, error) {
	s0, err := h.MakeStore(ctx)
	if err == nil && s0 == nil {
		err = errors.New("returned a nil store and no error")
	}
	if err != nil {
		return nil, fmt.Errorf("conformance: MakeStore: %w", err)
	}
	traits := s0.Traits()
	opts = opts.withDefaults(traits)
	rep := newReport(traits, opts)
	for _, c := range cases {
		if err := ctx.Err(); err != nil {
			return rep, errors.Join(rep.Err(), err)
		}
		if why := c.skip(traits, h, opts); why != "" {
			rep.add(Result{Case: c.name, Promise: c.promise, Skipped: why})
			continue
		}
		e, err := newEnv(ctx, h, &s0, traits, opts, rep)
		if err != nil {
			rep.add(Result{Case: c.name, Promise: c.promise, Problems: []string{fmt.Sprintf("%s: MakeStore: %v", c.name, err)}})
			continue
		}
		func() {
			defer e.cancel()
			defer func() {
				// A case must not take kvbreaker check down with it.
				if r := recover(); r != nil {
					e.errorf("the store must not panic", "panic: %v", r)
				}
			}()
			c.run(e.ctx, e)
		}()
		rep.add(e.result(c))
	}
	return rep, rep.Err()
}

// testCase is one row of the suite: a behaviour, the promise it checks, and
// the traits it needs.
type testCase struct {
	name    string
	promise string
	// atomic: the case needs a real compare (skipped for last-writer-wins
	// stores).
	atomic bool
	// slow: the case waits in real time unless the harness is a
	// TimeAdvancer.
	slow bool
	run  func(ctx context.Context, e *env)
}

func (c *testCase) skip(t core.Traits, h Harness, o Options) string {
	if c.atomic && !t.Atomic {
		return fmt.Sprintf("%s: store declares Traits().Atomic == false (last writer wins), so it does not promise %q", c.name, c.promise)
	}
	if c.slow && o.SkipSlow {
		if _, ok := h.(TimeAdvancer); !ok {
			return fmt.Sprintf("%s: waits in real time (skipped under -short; implement TimeAdvancer to run it on fake time)", c.name)
		}
	}
	return ""
}

// env is what a case runs with: a fresh store, instrumented to record round
// trips and to pace writes to one key by the declared MinWriteInterval.
type env struct {
	ctx    context.Context
	cancel context.CancelFunc
	t      *testing.T // nil under Check
	h      Harness
	raw    core.Store
	store  core.Store // raw, timed and paced
	traits core.Traits
	opts   Options
	rep    *Report

	mu       sync.Mutex
	problems []string
	notes    []string
}

// newEnv makes the environment for one case, over *spare (the store made to
// read the traits, used by the first case so none is wasted) or a new store.
func newEnv(ctx context.Context, h Harness, spare *core.Store, t core.Traits, o Options, rep *Report) (*env, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	s := *spare
	*spare = nil
	if s == nil {
		var err error
		if s, err = h.MakeStore(ctx); err != nil {
			cancel()
			return nil, err
		}
	}
	if s == nil {
		cancel()
		return nil, errors.New("MakeStore returned a nil store and no error")
	}
	e := &env{ctx: ctx, cancel: cancel, h: h, raw: s, traits: t, opts: o, rep: rep}
	e.store = &timedStore{Store: s, rep: rep, pace: t.MinWriteInterval, last: make(map[string]time.Time)}
	return e, nil
}

// errorf records a violation of promise.
func (e *env) errorf(promise, format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.problems = append(e.problems, fmt.Sprintf("%s: %s", promise, fmt.Sprintf(format, args...)))
}

// fatalf records a violation; the case should return right after.
func (e *env) fatalf(promise, format string, args ...any) { e.errorf(promise, format, args...) }

// logf records a note for the report (and the test log under Run).
func (e *env) logf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	e.mu.Lock()
	e.notes = append(e.notes, msg)
	e.mu.Unlock()
	if e.t != nil {
		e.t.Helper()
		e.t.Log(msg)
	}
}

func (e *env) result(c testCase) Result {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := Result{Case: c.name, Promise: c.promise, Notes: slices.Clone(e.notes)}
	for _, p := range e.problems {
		r.Problems = append(r.Problems, c.name+": "+p)
	}
	return r
}

// sleep waits d in real time or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// timedStore records each call's round trip and, for a store declaring a
// MinWriteInterval, serialises writes and starts each one no sooner than
// the interval (plus a tenth) after the previous write to its key returned.
type timedStore struct {
	core.Store
	rep  *Report
	pace time.Duration

	wmu  sync.Mutex // held across paced writes
	last map[string]time.Time
}

// turn waits for key's turn to be written and returns the function to call
// once the write has returned.
func (s *timedStore) turn(ctx context.Context, key string) (func(), error) {
	if s.pace <= 0 {
		return func() {}, nil
	}
	s.wmu.Lock()
	if last, ok := s.last[key]; ok && time.Until(last.Add(s.pace+s.pace/10)) > 0 {
		if err := sleep(ctx, time.Until(last.Add(s.pace+s.pace/10))); err != nil {
			s.wmu.Unlock()
			return nil, err
		}
	}
	return func() {
		s.last[key] = time.Now()
		s.wmu.Unlock()
	}, nil
}

func (s *timedStore) Get(ctx context.Context, key string) ([]byte, core.Version, error) {
	start := time.Now()
	v, ver, err := s.Store.Get(ctx, key)
	s.rep.roundTrip("get", time.Since(start))
	return v, ver, err
}

func (s *timedStore) CompareAndSwap(ctx context.Context, key string, old core.Version, value []byte, ttl time.Duration) (core.Version, error) {
	done, err := s.turn(ctx, key)
	if err != nil {
		return 0, err
	}
	defer done()
	start := time.Now()
	ver, err := s.Store.CompareAndSwap(ctx, key, old, value, ttl)
	s.rep.roundTrip("cas", time.Since(start))
	return ver, err
}

func (s *timedStore) CompareAndDelete(ctx context.Context, key string, old core.Version) error {
	done, err := s.turn(ctx, key)
	if err != nil {
		return err
	}
	defer done()
	start := time.Now()
	err = s.Store.CompareAndDelete(ctx, key, old)
	s.rep.roundTrip("delete", time.Since(start))
	return err
}

// yield gives other goroutines a chance to interleave.
func yield() { runtime.Gosched() }
