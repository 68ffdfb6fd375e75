package conformance

import (
	"cmp"
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

// Options are the suite's settings, as Report.Options shows them with
// defaults applied. Set them with the With… Options; the zero value of
// every field means its default.
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
	// when the harness cannot advance the backend's clock. Run sets it
	// under go test -short. The report lists what was not verified.
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

// Option sets one of the suite's Options.
type Option func(*Options)

// WithGoroutines sets Options.Goroutines.
func WithGoroutines(n int) Option { return func(o *Options) { o.Goroutines = n } }

// WithIterations sets Options.Iterations.
func WithIterations(n int) Option { return func(o *Options) { o.Iterations = n } }

// WithExpiryTTL sets Options.ExpiryTTL.
func WithExpiryTTL(d time.Duration) Option { return func(o *Options) { o.ExpiryTTL = d } }

// WithStateTTL sets Options.StateTTL.
func WithStateTTL(d time.Duration) Option { return func(o *Options) { o.StateTTL = d } }

// WithClockSkew sets Options.ClockSkew.
func WithClockSkew(d time.Duration) Option { return func(o *Options) { o.ClockSkew = d } }

// WithSkipSlow sets Options.SkipSlow. Run also sets it under go test
// -short, whatever this says.
func WithSkipSlow(skip bool) Option { return func(o *Options) { o.SkipSlow = skip } }

// WithTimeout sets Options.Timeout.
func WithTimeout(d time.Duration) Option { return func(o *Options) { o.Timeout = d } }

// WithReachTimeout sets Options.ReachTimeout.
func WithReachTimeout(d time.Duration) Option { return func(o *Options) { o.ReachTimeout = d } }

// WithTrials sets Options.Trials.
func WithTrials(n int) Option { return func(o *Options) { o.Trials = n } }

// WithCheckTimeout sets Options.CheckTimeout.
func WithCheckTimeout(d time.Duration) Option { return func(o *Options) { o.CheckTimeout = d } }

func resolve(opts []Option) Options {
	var o Options
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
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
	if c, err := machine.NewConfig(machine.Config{}, t); err == nil {
		return c.StateTTL
	}
	return max(kvbreaker.DefaultRecoveryDelay, kvbreaker.DefaultFailureWindow) + max(kvbreaker.DefaultTTLMargin, t.Expiry.RequiredMargin(kvbreaker.DefaultClockSkew))
}

// Run runs the whole suite against the stores newHarness makes, each case as
// a subtest named by its CaseID (so -run selects one) with a deadline from
// t.Context(). It calls newHarness once and closes the harness when the test
// ends.
//
// The store's Traits are the declaration the suite holds it to: a store that
// is not Atomic skips the cases that need a real compare (with a t.Skipf
// naming the trait) but must still do what it declares; a store that claims
// atomic compare-and-swap and loses an update fails. Cases that wait in real
// time are skipped under go test -short unless the harness implements
// TimeAdvancer; on real time they run concurrently, each on its own store,
// and their subtests come after the others. Run logs the report (go test -v
// shows it), and the "not-verified" subtest is skipped listing every promise
// the run did not verify.
func Run(t *testing.T, newHarness HarnessMaker, opts ...Option) {
	t.Helper()
	o := resolve(opts)
	o.SkipSlow = o.SkipSlow || testing.Short()
	h, err := newHarness(t.Context(), t)
	if err != nil {
		t.Fatalf("conformance: making the harness: %v", err)
	}
	if h == nil {
		t.Fatal("conformance: HarnessMaker returned a nil Harness and no error")
	}
	t.Cleanup(h.Close)
	r := newRunner(t.Context(), h, o)
	r.loop(t.Context(), func(c *testCase, do func(context.Context, *testing.T) Result) {
		t.Run(string(c.id), func(t *testing.T) {
			res := do(t.Context(), t)
			r.rep.add(res)
			logResult(t, res)
		})
	})
	t.Log("conformance report:\n" + r.rep.String())
	t.Run("not-verified", func(t *testing.T) {
		if nv := r.rep.NotVerified(); len(nv) > 0 {
			t.Skipf("%d promise(s) not verified:\n%s", len(nv), strings.Join(nv, "\n"))
		}
	})
}

// logResult reports res on t, the subtest of its case.
func logResult(t *testing.T, res Result) {
	t.Helper()
	if res.Kind == KindDeclaration {
		t.Logf("%s checks the declared Traits against kvbreaker's TTL margin in simulation; it never calls the store", res.Case)
	}
	if res.Skipped != "" {
		t.Skip(res.Skipped)
	}
	for _, n := range res.Notes {
		t.Log(n)
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
}

// Check runs the suite's cases against the stores h makes and returns every
// violation, joined, each a *Problem naming the case and the promise it
// breaks (match with errors.Is(err, PromiseExpiredCAS)), or nil. It is the
// form of Run that needs no *testing.T. Check does not close h.
func Check(ctx context.Context, h Harness, opts ...Option) error {
	_, err := Measure(ctx, h, opts...)
	return err
}

// Measure is Check also returning what it measured: per-case results,
// observed expiry and staleness, round-trip times, and the TTLMargin the
// store needs; `kvbreaker check` renders it. The error is the joined
// violations, as Check returns them, and ctx's error if it ended first (the
// report then lacks the cases not run); a Report is returned even when
// there are violations.
func Measure(ctx context.Context, h Harness, opts ...Option) (*Report, error) {
	r := newRunner(ctx, h, resolve(opts))
	r.loop(ctx, func(_ *testCase, do func(context.Context, *testing.T) Result) {
		r.rep.add(do(ctx, nil))
	})
	if err := ctx.Err(); err != nil {
		return r.rep, errors.Join(r.rep.Err(), err)
	}
	return r.rep, r.rep.Err()
}

// testCase is one row of the suite: a behaviour, the promise it checks, and
// the traits it needs.
type testCase struct {
	id      CaseID
	promise PromiseID
	kind    Kind
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
	// sampler: the case checks driver.ClockSampler, which a store need
	// not implement (not applicable, like atomic for Atomic == false).
	sampler bool
	run     func(ctx context.Context, e *env)
}

// skip says why c does not run over r's store, or ""; notPromised: the
// store does not make the case's promise, so nothing is left unverified.
func (c *testCase) skip(r *runner) (why string, notPromised bool) {
	if c.atomic && !r.traits.Atomic {
		return fmt.Sprintf("%s: store declares Traits().Atomic == false (last writer wins), so it does not promise %q", c.id, c.promise.Text()), true
	}
	if c.sampler && r.noSampler != "" {
		return fmt.Sprintf("%s: not applicable: %s, so it promises nothing about its clock", c.id, r.noSampler), true
	}
	if c.slow && r.opts.SkipSlow {
		if _, ok := r.h.(TimeAdvancer); !ok {
			return fmt.Sprintf("%s: waits in real time (skipped under -short; implement TimeAdvancer to run it on fake time)", c.id), false
		}
	}
	return "", false
}

// result is the empty Result of case i.
func (c *testCase) result(i int) Result {
	return Result{Case: c.id, Promise: c.promise, Kind: c.kind, NeedsAtomic: c.atomic, order: i}
}

// problem is a violation of promise found by c.
func (c *testCase) problem(promise PromiseID, format string, args ...any) error {
	return &Problem{Case: c.id, Promise: promise, Detail: fmt.Sprintf(format, args...)}
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
	// downPromise is the promise down breaks: PromiseReachable unless the
	// store answered the first Get with the wrong error.
	downPromise PromiseID
	// noSampler says why the harness's first store cannot show its clock
	// (it is no driver.ClockSampler), or "".
	noSampler string
	bg        sync.WaitGroup
}

func newRunner(ctx context.Context, h Harness, opts Options) *runner {
	r := &runner{h: h}
	reach := opts.ReachTimeout
	if reach <= 0 {
		reach = 5 * time.Second
	}
	rctx, cancel := context.WithTimeout(ctx, reach)
	defer cancel()
	r.down = r.reach(rctx, reach)
	r.opts = opts.withDefaults(r.traits)
	r.rep = newReport(r.traits, r.opts)
	return r
}

// reach makes the first store, reads its traits and sends it one Get; it
// returns why the store is unreachable, or "". A panic is an answer too.
func (r *runner) reach(ctx context.Context, limit time.Duration) (down string) {
	start := time.Now()
	var s0 driver.Store
	defer func() {
		if p := recover(); p != nil {
			down = fmt.Sprintf("%s panicked after %v: %v", describe(r.h, s0), time.Since(start).Round(time.Millisecond), p)
		}
	}()
	s0, err := r.h.MakeStore(ctx)
	if err == nil && s0 == nil {
		err = errors.New("returned a nil store and no error")
	}
	if err != nil {
		return fmt.Sprintf("MakeStore of %s failed after %v: %v", describe(r.h, nil), time.Since(start).Round(time.Millisecond), err)
	}
	r.traits = s0.Traits()
	r.spare = s0
	if _, ok := s0.(driver.ClockSampler); !ok {
		r.noSampler = fmt.Sprintf("the store MakeStore returns (%T) does not implement driver.ClockSampler (optional)", s0)
	}
	const key = "reachable.example"
	_, _, err = s0.Get(ctx, key)
	took := time.Since(start).Round(time.Millisecond)
	switch _, dial := driver.DialFailed(err); {
	case err == nil || errors.Is(err, driver.ErrNotFound):
		return ""
	case ctx.Err() != nil || dial || errors.Is(err, driver.ErrUnreachable):
		return fmt.Sprintf("%s did not answer Get within %v (after %v): %v", describe(r.h, s0), limit, took, err)
	}
	// It answered, wrongly: say what came back, not that nothing did.
	r.downPromise = PromiseGetAbsent
	return fmt.Sprintf("%s answered Get(%q), a key never written, after %v: it returned %v; want an error matching driver.ErrNotFound (every other case relies on that answer, so none ran)",
		describe(r.h, s0), key, took, err)
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

// loop is the suite's one case loop, behind Run and Measure. It starts
// every case that waits in real time in the background (when the harness
// cannot advance time), runs the other cases in table order, then collects
// the background ones, then runs the cases that must run alone. present
// shows one case (as a subtest under Run) and records its result; do runs
// it, or waits for it if it ran in the background. Once ctx ends, cases not
// started are not presented.
func (r *runner) loop(ctx context.Context, present func(c *testCase, do func(context.Context, *testing.T) Result)) {
	pending := make([]<-chan Result, len(cases))
	for i := range cases {
		pending[i] = r.start(ctx, i, &cases[i])
	}
	phase := func(pick func(i int, c *testCase) bool) {
		for i := range cases {
			c := &cases[i]
			if !pick(i, c) {
				continue
			}
			if p := pending[i]; p != nil {
				present(c, func(context.Context, *testing.T) Result { return <-p })
				continue
			}
			if ctx.Err() != nil {
				continue
			}
			present(c, func(ctx context.Context, t *testing.T) Result { return r.run(ctx, i, c, t) })
		}
	}
	phase(func(i int, c *testCase) bool { return pending[i] == nil && !c.alone })
	r.bg.Wait()
	phase(func(i int, _ *testCase) bool { return pending[i] != nil })
	phase(func(_ int, c *testCase) bool { return c.alone })
}

// start launches case i in the background if it waits in real time and the
// harness cannot advance time; it returns nil for a case to run inline.
func (r *runner) start(ctx context.Context, i int, c *testCase) <-chan Result {
	if c.alone {
		return nil
	}
	if _, adv := r.h.(TimeAdvancer); adv || !(c.slow || c.waits) || r.down != "" {
		return nil
	}
	if why, _ := c.skip(r); why != "" {
		return nil
	}
	ch := make(chan Result, 1)
	r.bg.Go(func() { ch <- r.run(ctx, i, c, nil) })
	return ch
}

// run runs case i now and returns its result; t is nil under Measure and
// for background cases. A panic anywhere in the case (the harness's
// MakeStore, the store, the case itself) fails the case, not the caller.
func (r *runner) run(ctx context.Context, i int, c *testCase, t *testing.T) (res Result) {
	res = c.result(i)
	if c.id == CaseReachable {
		if r.down != "" {
			res.Problems = []error{c.problem(cmp.Or(r.downPromise, PromiseReachable), "%s", r.down)}
		}
		return res
	}
	if r.down != "" {
		res.Skipped = fmt.Sprintf("%s: not run, the store is unreachable (see case %s)", c.id, CaseReachable)
		return res
	}
	if why, np := c.skip(r); why != "" {
		res.Skipped = why
		res.NotPromised = np
		return res
	}
	defer func() {
		if p := recover(); p != nil {
			res = c.result(i)
			res.Problems = []error{c.problem(PromiseNoPanic, "panic outside the case's calls to the store: %v", p)}
		}
	}()
	e, err := newEnv(ctx, r, r.takeSpare())
	if err != nil {
		res.Problems = []error{c.problem(PromiseMakeStore, "MakeStore: %v", err)}
		return res
	}
	e.t = t
	e.c = c
	defer e.cancel()
	func() {
		defer func() {
			// A case must not take kvbreaker check (or the suite) down
			// with it.
			if p := recover(); p != nil {
				e.errorf(PromiseNoPanic, "panic: %v", p)
			}
		}()
		c.run(e.ctx, e)
	}()
	return e.result(res)
}

// makeStore makes a store, one MakeStore at a time.
func (r *runner) makeStore(ctx context.Context) (driver.Store, error) {
	r.makeMu.Lock()
	defer r.makeMu.Unlock()
	s, err := r.h.MakeStore(ctx)
	if err == nil && s == nil {
		err = errors.New("MakeStore returned a nil store and no error")
	}
	return s, err
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
	t      *testing.T // nil under Measure and in the background
	c      *testCase
	r      *runner
	h      Harness
	raw    driver.Store
	store  driver.Store // raw, timed and paced
	traits driver.Traits
	opts   Options
	rep    *Report

	mu           sync.Mutex
	problems     []error
	notes        []string
	notVerified  []string
	inconclusive string
	advanced     time.Duration // moved on the harness's clock (TimeAdvancer)
}

// newEnv makes the environment for one case, over spare (the store made to
// read the traits, used by the first case so none is wasted) or a new store.
func newEnv(ctx context.Context, r *runner, spare driver.Store) (*env, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	s := spare
	if s == nil {
		var err error
		if s, err = r.makeStore(ctx); err != nil {
			cancel()
			return nil, err
		}
	}
	e := &env{ctx: ctx, cancel: cancel, r: r, h: r.h, raw: s, traits: r.traits, opts: r.opts, rep: r.rep}
	e.store = &timedStore{Store: s, rep: r.rep, pace: r.traits.MinWriteInterval, last: make(map[string]time.Time),
		panicked: func(op string, p any) { e.errorf(PromiseNoPanic, "%s panicked: %v", op, p) }}
	return e, nil
}

// errorf records a violation of promise.
func (e *env) errorf(promise PromiseID, format string, args ...any) {
	p := e.c.problem(promise, format, args...)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.problems = append(e.problems, p)
}

// fatalf records a violation; the case should return right after.
func (e *env) fatalf(promise PromiseID, format string, args ...any) {
	e.errorf(promise, format, args...)
}

// logf records a note for the report (and the case's log under Run).
func (e *env) logf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	e.mu.Lock()
	e.notes = append(e.notes, msg)
	e.mu.Unlock()
}

// notVerifiedf records something the case could not check, and why.
func (e *env) notVerifiedf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.notVerified = append(e.notVerified, fmt.Sprintf(format, args...))
}

// result fills res with what the case recorded.
func (e *env) result(res Result) Result {
	e.mu.Lock()
	defer e.mu.Unlock()
	res.Problems = slices.Clone(e.problems)
	res.Notes = slices.Clone(e.notes)
	res.NotVerified = slices.Clone(e.notVerified)
	res.Inconclusive = e.inconclusive
	return res
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
	// panicked records a panic of the store, which the call turns into an
	// error: a case's goroutines call the store too, and a panic there
	// would end the process.
	panicked func(op string, p any)

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

// recover turns a panic of the store's op into an error in *err.
func (s *timedStore) recover(op string, err *error) {
	if p := recover(); p != nil {
		s.panicked(op, p)
		*err = fmt.Errorf("conformance: the store's %s panicked: %v", op, p)
	}
}

func (s *timedStore) Get(ctx context.Context, key string) (_ []byte, _ driver.Version, err error) {
	defer s.recover("Get", &err)
	start := time.Now()
	v, ver, err := s.Store.Get(ctx, key)
	s.rep.roundTrip("get", time.Since(start))
	return v, ver, err
}

func (s *timedStore) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (_ driver.Version, err error) {
	defer s.recover("CompareAndSwap", &err)
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

func (s *timedStore) CompareAndDelete(ctx context.Context, key string, old driver.Version) (err error) {
	defer s.recover("CompareAndDelete", &err)
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
