package conformance

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/machine"
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
	// ExpiryTTL is the short TTL the expiry cases write with. Default
	// max(Traits().Expiry.MinTTL, 2 s).
	ExpiryTTL time.Duration
	// StateTTL is the long TTL the expiry cases also check: default, the
	// StateTTL a Breaker with default Settings writes over this store
	// (30 min 5 s for a store needing at most the default 5 s margin).
	// It is checked through the harness's TimeAdvancer or
	// LifetimeReporter, never waited for.
	StateTTL time.Duration
	// ClockSkew is the fleet's clock-skew bound δ, used by the Breaker-level
	// cases and to report the TTLMargin a fleet needs. Default
	// kvbreaker.DefaultClockSkew.
	ClockSkew time.Duration
	// SkipSlow skips the cases that wait in real time (expiry, staleness)
	// when the harness cannot advance the backend's clock. Run sets it under
	// go test -short. The report lists what was not verified.
	SkipSlow bool
	// Timeout bounds each case, within the caller's context. Default 2 min
	// plus the waits the store's declared traits force (minimum TTL, read
	// staleness).
	Timeout time.Duration
	// ReachTimeout bounds the first MakeStore and Get: a store that does
	// not answer within it fails the first case, naming the harness's
	// store, and every other case is skipped. Default 5 s.
	ReachTimeout time.Duration
	// Trials is how many randomised runs per margin the simulated-time
	// margin case makes. Default 200.
	Trials int
	// CheckTimeout bounds one porcupine search in the linearizability case
	// (default 1 min). A search that times out is retried on a fresh
	// history, and the case reports inconclusive if it times out again.
	CheckTimeout time.Duration
}

func (o Options) withDefaults(t driver.Traits) Options {
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
		o.ClockSkew = kvbreaker.DefaultClockSkew
	}
	if o.StateTTL <= 0 {
		o.StateTTL = defaultStateTTL(t)
	}
	if o.Trials <= 0 {
		o.Trials = 200
	}
	if o.ReachTimeout <= 0 {
		o.ReachTimeout = 5 * time.Second
	}
	if o.CheckTimeout <= 0 {
		o.CheckTimeout = time.Minute
	}
	if o.Timeout <= 0 {
		o.Timeout = 2*time.Minute + 2*max(o.ExpiryTTL, t.Expiry.MinTTL) + t.Expiry.Granularity + t.Expiry.Late + 8*t.ReadStaleness
	}
	return o
}

// defaultStateTTL is the TTL a Breaker with default Settings writes over a
// store declaring t.
func defaultStateTTL(t driver.Traits) time.Duration {
	if c, err := machine.NewConfig(machine.Settings{}, t); err == nil {
		return c.StateTTL
	}
	return max(kvbreaker.DefaultRecoveryDelay, kvbreaker.DefaultFailureWindow) + max(kvbreaker.DefaultTTLMargin, t.Expiry.RequiredMargin(kvbreaker.DefaultClockSkew))
}

// Run runs the whole suite against the stores newHarness makes, each case as
// a named subtest (so -run selects one) with a deadline from t.Context(). It
// calls newHarness once and closes the harness when the test ends.
//
// The store's Traits are the declaration the suite holds it to: a store that
// is not Atomic skips the cases that need a real compare (with a t.Skipf
// naming the trait) but must still do what it declares; a store that claims
// atomic compare-and-swap and loses an update fails. Cases that wait in real
// time are skipped under -short unless the harness implements TimeAdvancer;
// on real time they run concurrently, each on its own store. The "report"
// subtest logs the report, and "not-verified" is skipped listing every
// promise the run did not verify (go test -v shows both).
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
	r := newRunner(t.Context(), h, opts)
	pending := r.startAll(t.Context())
	for i, c := range cases {
		pending := pending[i]
		if c.alone {
			r.bg.Wait()
		}
		t.Run(c.name, func(t *testing.T) {
			var res Result
			if pending != nil {
				res = <-pending
			} else {
				res = r.run(t.Context(), i, c, t)
			}
			r.rep.add(res)
			if res.Skipped != "" {
				t.Skip(res.Skipped)
			}
			if pending != nil {
				for _, n := range res.Notes {
					t.Log(n)
				}
			}
			for _, n := range res.NotVerified {
				t.Log("NOT VERIFIED: " + n)
			}
			for _, p := range res.Problems {
				t.Error(p)
			}
			if res.Inconclusive != "" && len(res.Problems) == 0 {
				t.Skip("INCONCLUSIVE: " + res.Inconclusive)
			}
		})
	}
	t.Run("report", func(t *testing.T) { t.Log("\n" + r.rep.String()) })
	t.Run("not-verified", func(t *testing.T) {
		if nv := r.rep.NotVerified(); len(nv) > 0 {
			t.Skipf("%d promise(s) not verified:\n%s", len(nv), strings.Join(nv, "\n"))
		}
	})
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
	r := newRunner(ctx, h, opts)
	pending := r.startAll(ctx)
	for i, c := range cases {
		if pending[i] != nil {
			continue
		}
		if c.alone {
			r.bg.Wait()
		}
		if err := ctx.Err(); err != nil {
			break
		}
		r.rep.add(r.run(ctx, i, c, nil))
	}
	r.bg.Wait()
	for _, p := range pending {
		if p != nil {
			r.rep.add(<-p)
		}
	}
	if err := ctx.Err(); err != nil {
		return r.rep, errors.Join(r.rep.Err(), err)
	}
	return r.rep, r.rep.Err()
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
	// TimeAdvancer (skipped under SkipSlow without one).
	slow bool
	// waits: the case may wait in real time, but decides itself what it
	// can check under SkipSlow (and reports the rest not verified).
	waits bool
	// alone: the case needs every other case finished (it arms a fault
	// that hits the harness's next request, whichever store sends it).
	alone bool
	run   func(ctx context.Context, e *env)
}

func (c *testCase) skip(t driver.Traits, h Harness, o Options) string {
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

// runner runs the table: the first case checks that the store answers at
// all, cases that wait in real time run in the background (on a harness
// without TimeAdvancer, whose clock is shared), and a case that must run
// alone waits for them.
type runner struct {
	h      Harness
	opts   Options
	traits driver.Traits
	rep    *Report
	mu     sync.Mutex // guards spare
	// makeMu serialises MakeStore: background cases start together, and a
	// harness need not be safe for concurrent use.
	makeMu sync.Mutex
	spare  driver.Store
	// down says why the store is unreachable; every later case skips.
	down string
	bg   sync.WaitGroup
}

func newRunner(ctx context.Context, h Harness, opts Options) *runner {
	r := &runner{h: h}
	reach := opts.ReachTimeout
	if reach <= 0 {
		reach = 5 * time.Second
	}
	rctx, cancel := context.WithTimeout(ctx, reach)
	defer cancel()
	start := time.Now()
	s0, err := h.MakeStore(rctx)
	if err == nil && s0 == nil {
		err = errors.New("returned a nil store and no error")
	}
	if err != nil {
		r.down = fmt.Sprintf("MakeStore of %s failed after %v: %v", describe(h, nil), time.Since(start).Round(time.Millisecond), err)
		r.opts = opts.withDefaults(driver.Traits{})
		r.rep = newReport(driver.Traits{}, r.opts)
		return r
	}
	r.spare = s0
	r.traits = s0.Traits()
	r.opts = opts.withDefaults(r.traits)
	r.rep = newReport(r.traits, r.opts)
	if _, _, err := s0.Get(rctx, "reachable.example"); err != nil && !errors.Is(err, driver.ErrNotFound) {
		r.down = fmt.Sprintf("%s did not answer Get within %v (after %v): %v", describe(h, s0), reach, time.Since(start).Round(time.Millisecond), err)
	}
	return r
}

// describe names the harness's store for an unreachable-store message.
func describe(h Harness, s driver.Store) string {
	if d, ok := h.(Describer); ok {
		return d.Describe()
	}
	if s != nil {
		return fmt.Sprintf("the %T store (harness %T; implement conformance.Describer to name its address)", s, h)
	}
	return fmt.Sprintf("harness %T (implement conformance.Describer to name its store and address)", h)
}

// startAll launches, at once, every case that waits in real time when the
// harness cannot advance time (each on its own store), and returns their
// results' channels by table index (nil for a case to run inline).
func (r *runner) startAll(ctx context.Context) []<-chan Result {
	out := make([]<-chan Result, len(cases))
	for i, c := range cases {
		out[i] = r.start(ctx, i, c)
	}
	return out
}

// start launches case i in the background if it waits in real time and the
// harness cannot advance time; it returns nil for a case to run inline.
func (r *runner) start(ctx context.Context, i int, c testCase) <-chan Result {
	if c.alone {
		return nil
	}
	if _, adv := r.h.(TimeAdvancer); adv || !(c.slow || c.waits) || r.down != "" {
		return nil
	}
	if c.skip(r.traits, r.h, r.opts) != "" {
		return nil
	}
	ch := make(chan Result, 1)
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		ch <- r.run(ctx, i, c, nil)
	}()
	return ch
}

// run runs case i now and returns its result; t is nil under Measure and
// for background cases.
func (r *runner) run(ctx context.Context, i int, c testCase, t *testing.T) (res Result) {
	base := Result{Case: c.name, Promise: c.promise, order: i}
	if c.name == reachCase {
		if r.down != "" {
			base.Problems = []string{fmt.Sprintf("%s: %s: %s", c.name, promiseReach, r.down)}
		}
		return base
	}
	if r.down != "" {
		base.Skipped = fmt.Sprintf("%s: not run, the store is unreachable (see case %s)", c.name, reachCase)
		return base
	}
	if why := c.skip(r.traits, r.h, r.opts); why != "" {
		base.Skipped = why
		base.notPromised = c.atomic && !r.traits.Atomic
		return base
	}
	e, err := newEnv(ctx, r.h, r.takeSpare(), r.traits, r.opts, r.rep, &r.makeMu)
	if err != nil {
		base.Problems = []string{fmt.Sprintf("%s: MakeStore: %v", c.name, err)}
		return base
	}
	e.t = t
	defer e.cancel()
	func() {
		defer func() {
			// A case must not take kvbreaker check (or the suite) down
			// with it.
			if p := recover(); p != nil {
				e.errorf("the store must not panic", "panic: %v", p)
			}
		}()
		c.run(e.ctx, e)
	}()
	res = e.result(c)
	res.order = i
	return res
}

// takeSpare hands out the store made to read the traits, once, so none is
// wasted.
func (r *runner) takeSpare() driver.Store {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.spare
	r.spare = nil
	return s
}

// env is what a case runs with: a fresh store, instrumented to record round
// trips and to pace writes to one key by the declared MinWriteInterval.
type env struct {
	ctx    context.Context
	cancel context.CancelFunc
	t      *testing.T // nil under Check
	h      Harness
	raw    driver.Store
	store  driver.Store // raw, timed and paced
	traits driver.Traits
	opts   Options
	rep    *Report

	mu           sync.Mutex
	problems     []string
	notes        []string
	notVerified  []string
	inconclusive string
	advanced     time.Duration // moved on the harness's clock (TimeAdvancer)
}

// newEnv makes the environment for one case, over spare (the store made to
// read the traits, used by the first case so none is wasted) or a new store.
func newEnv(ctx context.Context, h Harness, spare driver.Store, t driver.Traits, o Options, rep *Report, makeMu *sync.Mutex) (*env, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	s := spare
	if s == nil {
		var err error
		makeMu.Lock()
		s, err = h.MakeStore(ctx)
		makeMu.Unlock()
		if err != nil {
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

// notVerifiedf records something the case could not check, and why.
func (e *env) notVerifiedf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.notVerified = append(e.notVerified, fmt.Sprintf(format, args...))
}

func (e *env) result(c testCase) Result {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := Result{Case: c.name, Promise: c.promise, Notes: slices.Clone(e.notes),
		NotVerified: slices.Clone(e.notVerified), Inconclusive: e.inconclusive}
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
	driver.Store
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

func (s *timedStore) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	start := time.Now()
	v, ver, err := s.Store.Get(ctx, key)
	s.rep.roundTrip("get", time.Since(start))
	return v, ver, err
}

func (s *timedStore) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
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

func (s *timedStore) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
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
