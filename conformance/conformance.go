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

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/conformcheck"
	"github.com/kvbreaker/kvbreaker/internal/machine"
)

// options are the suite's settings (conformcheck.Options documents each):
// an adapter author sets them with the With… Options and Waive; the suite's
// own tests and kvbreaker check also reach the rest through conformcheck.
type options = conformcheck.Options

// Option sets one of the suite's settings.
type Option func(*options)

// WithIterations sets how many read-then-swap rounds each goroutine makes
// in the linearizability case (default 40). The check finds no false
// violations but can miss a race that did not happen: raise it, and run
// under -race, for more confidence.
func WithIterations(n int) Option { return func(o *options) { o.Iterations = n } }

// WithExpiryTTL sets the short TTL the expiry cases write with (default
// max(Traits().Expiry.MinTTL, 2 s)); a harness on fake time (TimeAdvancer)
// can check expiry at a TTL of an hour.
func WithExpiryTTL(d time.Duration) Option { return func(o *options) { o.ExpiryTTL = d } }

// WithClockSkew sets the fleet's clock-skew bound δ the Breaker-level cases
// run with (default kvbreaker's default ClockSkew).
func WithClockSkew(d time.Duration) Option { return func(o *options) { o.ClockSkew = d } }

// WithSkipSlow skips the cases that wait in real time when the harness
// cannot advance the backend's clock: the -short of Check. Run also skips
// them under go test -short, whatever this says. What they would verify is
// reported not verified, and does not fail the run.
func WithSkipSlow(skip bool) Option { return func(o *options) { o.SkipSlow = skip } }

// Waive accepts promise unverified: a harness that cannot give the suite
// what verifying it needs (a TimeAdvancer or LifetimeReporter for the TTL a
// Breaker writes, an AnswerDropper for lost answers, a ForeignPlanter)
// says so here, with the reason, instead of Run and Check failing. Only the
// promises a Breaker relies on that a harness can leave unverified can be
// waived (the "not-verified" subtest names them, and the waiver each would
// need); a waiver never excuses a broken promise. Run and Check fail when
// reason is empty or promise is not one of those. The report lists every
// waiver and its reason, and a case whose promise was waived is reported
// WAIVED, never passed.
func Waive(promise PromiseID, reason string) Option {
	return func(o *options) {
		o.Waivers = append(o.Waivers, conformcheck.Waiver{Promise: string(promise), Reason: reason})
	}
}

func resolve(opts []func(*options)) options {
	var o options
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

// checkWaivers returns why the waivers in o are not valid, or nil.
func checkWaivers(o options) error {
	var errs []error
	seen := map[string]bool{}
	for _, w := range o.Waivers {
		p := PromiseID(w.Promise)
		_, ok := reliedOn[p]
		switch {
		case !ok && promiseText[p] != "":
			errs = append(errs, fmt.Errorf("conformance: Waive(%q): a promise the suite always verifies (or reports broken) cannot be waived; only these can: %s", w.Promise, waivable()))
		case !ok:
			errs = append(errs, fmt.Errorf("conformance: Waive(%q): no such promise; these can be waived: %s", w.Promise, waivable()))
		case strings.TrimSpace(w.Reason) == "":
			errs = append(errs, fmt.Errorf("conformance: Waive(%q, \"\"): a waiver needs a reason (why this store keeps the promise although the suite cannot check it)", w.Promise))
		case seen[w.Promise]:
			errs = append(errs, fmt.Errorf("conformance: %q is waived twice", w.Promise))
		}
		seen[w.Promise] = true
	}
	return errors.Join(errs...)
}

// waiver returns the reason promise was waived for, or "".
func waiver(o options, promise PromiseID) string {
	for _, w := range o.Waivers {
		if w.Promise == string(promise) {
			return w.Reason
		}
	}
	return ""
}

func withDefaults(o options, t driver.Traits) options {
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
		o.ClockSkew = machine.DefaultClockSkew
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
	if o.FollowHeartbeat <= 0 {
		o.FollowHeartbeat = defaultFollowHeartbeat
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
	return max(machine.DefaultRecoveryDelay, machine.DefaultFailureWindow) + max(machine.DefaultTTLMargin, t.Expiry.RequiredMargin(machine.DefaultClockSkew))
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
// shows it).
//
// Run fails closed: a promise a Breaker relies on that the run could not
// verify (the harness lacks the capability it needs) fails its case and the
// final "not-verified" subtest, which names each such promise and the
// Waive call that would accept it, unless the harness waives it. What is
// left unverified only because of -short, and what a Breaker does not rely
// on, is listed there as skipped, not failed. A case that verified less
// than its promise is reported SKIP (WAIVED or NOT VERIFIED), never PASS.
func Run(t *testing.T, newHarness HarnessMaker, opts ...Option) {
	t.Helper()
	o := resolve(funcs(opts))
	o.SkipSlow = o.SkipSlow || testing.Short()
	if err := checkWaivers(o); err != nil {
		t.Fatal(err)
	}
	h, err := newHarness(t.Context(), t)
	if err != nil {
		t.Fatalf("conformance: making the harness: %v", err)
	}
	if h == nil {
		t.Fatal("conformance: HarnessMaker returned a nil Harness and no error")
	}
	t.Cleanup(h.Close)
	r := newRunner(t.Context(), h, o)
	r.loop(t.Context(), func(i int, c *testCase, do func(context.Context, *testing.T) result) {
		t.Run(string(c.id), func(t *testing.T) {
			res := do(t.Context(), t)
			r.rep.Add(i, res)
			logResult(t, res)
		})
	})
	t.Log("conformance report:\n" + r.rep.String())
	t.Run("not-verified", func(t *testing.T) {
		if err := notVerifiedErr(r.rep.Report); err != nil {
			t.Error(err)
			return
		}
		if nv := r.rep.NotVerified(); len(nv) > 0 {
			t.Skipf("%d promise(s) not verified, none a Breaker relies on without -short or a waiver:\n%s", len(nv), strings.Join(nv, "\n"))
		}
	})
}

// funcs turns Options into what conformcheck takes.
func funcs(opts []Option) []func(*options) {
	out := make([]func(*options), len(opts))
	for i, o := range opts {
		out[i] = o
	}
	return out
}

// logResult reports res on t, the subtest of its case.
func logResult(t *testing.T, res result) {
	t.Helper()
	if res.Kind == conformcheck.KindDeclaration {
		t.Logf("%s checks the declared Traits against kvbreaker's TTL margin in simulation; it never calls the store", res.Case)
	}
	if res.Skipped != "" {
		t.Skip(res.Skipped)
	}
	for _, n := range res.Notes {
		t.Log(n)
	}
	var skip []string
	for _, g := range res.NotVerified {
		switch {
		case g.Blocks():
			t.Errorf("NOT VERIFIED: %s: %s; a Breaker relies on it: give the harness what it needs, or waive it with %s, meaning %s", g.Promise, g.Detail, g.Waive, g.Meaning)
		case g.Waived != "":
			skip = append(skip, fmt.Sprintf("WAIVED: %s: %s (the harness: %s)", g.Promise, g.Detail, g.Waived))
		case g.Excused != "":
			skip = append(skip, fmt.Sprintf("NOT VERIFIED: %s: %s (%s)", g.Promise, g.Detail, g.Excused))
		default:
			skip = append(skip, fmt.Sprintf("NOT VERIFIED: %s: %s", g.Promise, g.Detail))
		}
	}
	for _, p := range res.Problems {
		t.Error(p)
	}
	if t.Failed() {
		return
	}
	if res.Inconclusive != "" {
		skip = append(skip, "INCONCLUSIVE: "+res.Inconclusive)
	}
	if len(skip) > 0 {
		// Not PASS: the case did not verify all it checks.
		t.Skip(strings.Join(skip, "\n"))
	}
}

// ErrNotVerified is what Check's error matches (errors.Is) when a promise
// a Breaker relies on was neither verified nor waived; the error names each
// one and the Waive call that would accept it.
var ErrNotVerified = errors.New("conformance: promises a Breaker relies on were not verified")

// notVerifiedErr is the error for rep's blocking gaps, or nil.
func notVerifiedErr(rep *conformcheck.Report) error {
	cases, gaps := rep.Blocking()
	if len(gaps) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d check(s) could not be made:", len(gaps))
	waives := map[string]bool{}
	var calls []string
	for i, g := range gaps {
		fmt.Fprintf(&b, "\n  - %s (%s), case %s: %s", g.Promise, g.PromiseText, cases[i], g.Detail)
		if !waives[g.Promise] {
			waives[g.Promise] = true
			calls = append(calls, fmt.Sprintf("\n  %s\n      meaning %s", g.Waive, g.Meaning))
		}
	}
	fmt.Fprintf(&b, "\nGive the harness the capability each names, or, if this store keeps the promise in a way the suite cannot check, waive it explicitly (the report then lists the waiver):%s", strings.Join(calls, ""))
	return fmt.Errorf("%w: %s", ErrNotVerified, b.String())
}

// Check runs the suite's cases against the stores h makes and returns every
// violation, joined, each a *Problem naming the case and the promise it
// breaks (match with errors.Is(err, conformance.PromiseID("expired-absent-cas"))), or nil. It is the
// form of Run that needs no *testing.T, and it fails closed as Run does: a
// promise a Breaker relies on that the run could not verify, and the
// harness did not waive, adds an error matching ErrNotVerified. Check does
// not close h.
func Check(ctx context.Context, h Harness, opts ...Option) error {
	o := resolve(funcs(opts))
	if err := checkWaivers(o); err != nil {
		return err
	}
	rep, err := measure(ctx, h, o)
	return errors.Join(err, notVerifiedErr(rep))
}

// measure is the engine behind Check and conformcheck.Measure: the report
// and the joined violations, with ctx's error if it ended first.
func measure(ctx context.Context, h Harness, o options) (*conformcheck.Report, error) {
	if err := checkWaivers(o); err != nil {
		return nil, err
	}
	r := newRunner(ctx, h, o)
	r.loop(ctx, func(i int, _ *testCase, do func(context.Context, *testing.T) result) {
		r.rep.Add(i, do(ctx, nil))
	})
	if err := ctx.Err(); err != nil {
		return r.rep.Report, errors.Join(r.rep.Err(), err)
	}
	return r.rep.Report, r.rep.Err()
}

func init() {
	conformcheck.Register(&conformcheck.Engine{
		Measure: func(ctx context.Context, h conformcheck.Harness, opts []func(*options)) (*conformcheck.Report, error) {
			return measure(ctx, h, resolve(opts))
		},
		Cases: func() []string {
			ids := make([]string, len(cases))
			for i, c := range cases {
				ids[i] = string(c.id)
			}
			return ids
		},
	})
}

// result is one case's outcome, as the report holds it.
type result = conformcheck.Result

// report is the run's report, with the unexported setters the cases call.
type report struct{ *conformcheck.Report }

func (r report) setExpiry(m expiryMeasurement) { r.SetExpiry(m) }
func (r report) setStaleness(d time.Duration)  { r.SetStaleness(d) }
func (r report) roundTrip(op string, d time.Duration) {
	r.AddRoundTrip(op, d)
}

// expiryMeasurement is what the expiry case observed for one entry.
type expiryMeasurement = conformcheck.ExpiryMeasurement

// kindDeclaration marks the cases that check the declared Traits in
// simulation, never calling the store.
const kindDeclaration = conformcheck.KindDeclaration

// testCase is one row of the suite: a behaviour, the promise it checks, and
// the traits it needs.
type testCase struct {
	id      CaseID
	promise PromiseID
	kind    conformcheck.Kind
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
	// lister: the case checks driver.Lister, which a store need not
	// implement either.
	lister bool
	// follower: the case checks driver.Follower, optional too.
	follower bool
	run      func(ctx context.Context, e *env)
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
	if c.lister && r.noLister != "" {
		return fmt.Sprintf("%s: not applicable: %s, so it promises nothing about listing", c.id, r.noLister), true
	}
	if c.follower && r.noFollower != "" {
		return fmt.Sprintf("%s: not applicable: %s, so it promises nothing about following", c.id, r.noFollower), true
	}
	if c.slow && r.opts.SkipSlow {
		if _, ok := r.h.(TimeAdvancer); !ok {
			return fmt.Sprintf("%s: waits in real time (skipped under -short; implement TimeAdvancer to run it on fake time)", c.id), false
		}
	}
	return "", false
}

// result is the empty result of c.
func (c *testCase) result() result {
	return result{Case: string(c.id), Promise: string(c.promise), PromiseText: c.promise.Text(), Kind: c.kind, NeedsAtomic: c.atomic}
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
	opts   options
	traits driver.Traits
	rep    report
	mu     sync.Mutex // guards spare
	// makeMu serialises MakeStore: background cases start together, and a
	// harness need not be safe for concurrent use.
	makeMu sync.Mutex
	spare  driver.Store
	// down says why the store is unreachable; every later case skips.
	down string
	// downPromise is the promise down breaks: "reachable" unless the
	// store answered the first Get with the wrong error.
	downPromise PromiseID
	// noSampler says why the harness's first store cannot show its clock
	// (it is no driver.ClockSampler), or "".
	noSampler string
	// noLister says why the harness's first store cannot list its keys,
	// or "".
	noLister string
	// noFollower says why the harness's first store cannot follow its
	// keys, or "".
	noFollower string
	bg         sync.WaitGroup
}

func newRunner(ctx context.Context, h Harness, opts options) *runner {
	r := &runner{h: h}
	reach := opts.ReachTimeout
	if reach <= 0 {
		reach = 5 * time.Second
	}
	rctx, cancel := context.WithTimeout(ctx, reach)
	defer cancel()
	r.down = r.reach(rctx, reach)
	r.opts = withDefaults(opts, r.traits)
	r.rep = report{conformcheck.NewReport(r.traits, r.opts)}
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
	if l, ok := s0.(driver.Lister); !ok {
		r.noLister = fmt.Sprintf("the store MakeStore returns (%T) does not implement driver.Lister (optional)", s0)
	} else if _, _, err := l.List(ctx, "absent-prefix/", "", 1); errors.Is(err, errors.ErrUnsupported) {
		r.noLister = fmt.Sprintf("the store MakeStore returns (%T) answers List with %v", s0, err)
	}
	const key = "reachable.example"
	_, _, err = s0.Get(ctx, key)
	took := time.Since(start).Round(time.Millisecond)
	switch _, dial := adapter.DialFailed(err); {
	case err == nil || errors.Is(err, driver.ErrNotFound):
		r.noFollower = probeFollower(ctx, s0)
		return ""
	case ctx.Err() != nil || dial || errors.Is(err, driver.ErrUnreachable):
		return fmt.Sprintf("%s did not answer Get within %v (after %v): %v", describe(r.h, s0), limit, took, err)
	}
	// It answered, wrongly: say what came back, not that nothing did.
	r.downPromise = promiseGetAbsent
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
func (r *runner) loop(ctx context.Context, present func(i int, c *testCase, do func(context.Context, *testing.T) result)) {
	pending := make([]<-chan result, len(cases))
	for i := range cases {
		pending[i] = r.start(ctx, &cases[i])
	}
	phase := func(pick func(i int, c *testCase) bool) {
		for i := range cases {
			c := &cases[i]
			if !pick(i, c) {
				continue
			}
			if p := pending[i]; p != nil {
				present(i, c, func(context.Context, *testing.T) result { return <-p })
				continue
			}
			if ctx.Err() != nil {
				continue
			}
			present(i, c, func(ctx context.Context, t *testing.T) result { return r.run(ctx, c, t) })
		}
	}
	phase(func(i int, c *testCase) bool { return pending[i] == nil && !c.alone })
	r.bg.Wait()
	phase(func(i int, _ *testCase) bool { return pending[i] != nil })
	phase(func(_ int, c *testCase) bool { return c.alone })
}

// start launches case i in the background if it waits in real time and the
// harness cannot advance time; it returns nil for a case to run inline.
func (r *runner) start(ctx context.Context, c *testCase) <-chan result {
	if c.alone {
		return nil
	}
	if _, adv := r.h.(TimeAdvancer); adv || !(c.slow || c.waits) || r.down != "" {
		return nil
	}
	if why, _ := c.skip(r); why != "" || (len(r.opts.Only) > 0 && !slices.Contains(r.opts.Only, string(c.id))) {
		return nil
	}
	ch := make(chan result, 1)
	r.bg.Go(func() { ch <- r.run(ctx, c, nil) })
	return ch
}

// run runs case c now and returns its result; t is nil under Measure and
// for background cases. A panic anywhere in the case (the harness's
// MakeStore, the store, the case itself) fails the case, not the caller.
func (r *runner) run(ctx context.Context, c *testCase, t *testing.T) (res result) {
	res = c.result()
	if c.id == caseReachable {
		if r.down != "" {
			res.Problems = []error{c.problem(cmp.Or(r.downPromise, promiseReachable), "%s", r.down)}
		}
		return res
	}
	if r.down != "" {
		res.Skipped = fmt.Sprintf("%s: not run, the store is unreachable (see case %s)", c.id, caseReachable)
		return res
	}
	if len(r.opts.Only) > 0 && !slices.Contains(r.opts.Only, string(c.id)) {
		res.Skipped = fmt.Sprintf("%s: not selected", c.id)
		return res
	}
	if why, np := c.skip(r); why != "" {
		res.Skipped = why
		res.NotPromised = np
		return res
	}
	defer func() {
		if p := recover(); p != nil {
			res = c.result()
			res.Problems = []error{c.problem(promiseNoPanic, "panic outside the case's calls to the store: %v", p)}
		}
	}()
	e, err := newEnv(ctx, r, r.takeSpare())
	if err != nil {
		res.Problems = []error{c.problem(promiseMakeStore, "MakeStore: %v", err)}
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
				e.errorf(promiseNoPanic, "panic: %v", p)
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
	opts   options
	rep    report

	mu           sync.Mutex
	problems     []error
	notes        []string
	notVerified  []conformcheck.Gap
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
		panicked: func(op string, p any) { e.errorf(promiseNoPanic, "%s panicked: %v", op, p) }}
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

// notVerifiedf records something of the case's promise the case could
// not check, and why: a missing harness capability, a wait the run skips.
// For a promise a Breaker relies on it fails the run unless waived, or
// excused because the run skips real-time waits and the case waits in
// real time.
func (e *env) notVerifiedf(format string, args ...any) {
	excused := ""
	if e.opts.SkipSlow && (e.c.slow || e.c.waits) {
		excused = "the run skips real-time waits (-short, WithSkipSlow); a run without fails unless it is verified or waived"
	}
	e.gap(excused, format, args...)
}

// undecidedf records a check the case made but could not decide within
// what real time lets it measure (a probe that straddles a bound): not
// verified, but no capability would change that, so it never fails the
// run.
func (e *env) undecidedf(format string, args ...any) {
	e.gap("a measurement that real time left undecided, not a missing capability", format, args...)
}

// suggestWaive is the call a report suggests for a relied-on promise left
// unverified.
func suggestWaive(p PromiseID) string {
	return fmt.Sprintf("conformance.Waive(%q, \"why this store keeps it\")", string(p))
}

func (e *env) gap(excused, format string, args ...any) {
	p := e.c.promise
	g := conformcheck.Gap{Promise: string(p), PromiseText: p.Text(), Detail: fmt.Sprintf(format, args...), Excused: excused}
	if meaning, ok := reliedOn[p]; ok {
		g.ReliedOn = true
		g.Waived = waiver(e.opts, p)
		g.Waive = suggestWaive(p)
		g.Meaning = meaning
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.notVerified = append(e.notVerified, g)
}

// result fills res with what the case recorded.
func (e *env) result(res result) result {
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
	rep  report
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
