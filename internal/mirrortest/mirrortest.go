// Package mirrortest is what the backends' mirror fleet tests share: a
// fleet of Breakers with Settings.Mirror, each over a store of its own (its
// own client and connections, as separate processes would have) on one
// keyspace, watched through their Observers.
//
//   - Propagate: one Breaker opens a circuit and every other Breaker must
//     answer Hold within a bound derived from the feed delay measured in
//     the same run (Observer.MirrorLag of every Breaker's own writes):
//     PropagationFactor times its p99.
//   - BreakAndChange: the feeds of some Breakers are broken (the caller's
//     Break: a reset connection, CLIENT KILL, pg_terminate_backend, a
//     server restart) and, while they are, another Breaker opens a
//     circuit. Each Breaker whose feed broke must report it
//     (Observer.Mirror, unhealthy: lost or ended); from then until its
//     feed has resynchronised no decision of it may come from the mirror,
//     and every decision must agree with the store; after the resync it
//     must decide from the mirror again, and agree.
//
// To make "while it is broken" certain rather than likely, the Mirror hook
// of a Breaker whose feed Break breaks blocks on its first unhealthy report
// until the change is made and checked: the hook runs on the mirror's
// goroutine, so the feed cannot resynchronise meanwhile. Without the hold
// a quick store would often resynchronise before the write, which then
// arrives through the new feed as any write does.
package mirrortest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
)

// DefaultWait bounds each wait for the fleet (a feed's snapshot, a
// resync, a change's arrival) on a loaded machine.
const DefaultWait = 20 * time.Second

// PropagationFactor times the p99 of the measured feed delay (plus the
// polling interval) is how long another Breaker may take to answer Hold
// after the write that opened a circuit was sent. Each of the other
// Breakers' feeds delivers that write with the same mechanism and delay
// as the writes MirrorLag measured, so the longest of N−1 arrivals is
// above their p99 about (N−1)% of the time; twice the p99 leaves room for
// the tail of a shared machine.
const PropagationFactor = 2

// Rounds is how many times Propagate measures before it fails: a round
// whose slowest arrival is past its bound is repeated on a fresh host, as
// a load spike on the machine (not the mirror) can make one round slow.
// A mirror that missed the write never answers Hold at all.
const Rounds = 3

// Fleet is Breakers over one keyspace, each with a mirror.
type Fleet struct {
	Breakers []*kvbreaker.Breaker
	Settings kvbreaker.Settings
	// Wait bounds each wait (DefaultWait).
	Wait time.Duration
	w    []*watch

	lagMu  sync.Mutex
	lags   []time.Duration
	lagged chan struct{} // signalled on each MirrorLag
}

// decision is one Allow's answer, as the Decision hook saw it.
type decision struct {
	host     string
	d        kvbreaker.Decision
	mirrored bool
	cached   bool
	err      error
}

// watch is one Breaker's Observer state.
type watch struct {
	i    int
	wait time.Duration
	mu   sync.Mutex
	// healthy is the mirror's state as last reported; events every report.
	healthy   bool
	events    []kvbreaker.MirrorInfo
	decisions []decision
	changed   chan struct{}

	// armed: the next unhealthy report (lost or ended) blocks until
	// release is closed; held is closed once it does.
	armed   atomic.Bool
	held    chan struct{}
	release chan struct{}
	relOnce sync.Once
}

func (w *watch) signal() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func (w *watch) unhold() { w.relOnce.Do(func() { close(w.release) }) }

func (w *watch) observer(f *Fleet) *kvbreaker.Observer {
	return &kvbreaker.Observer{
		Decision: func(_ context.Context, e kvbreaker.DecisionInfo) {
			w.mu.Lock()
			w.decisions = append(w.decisions, decision{host: e.Host, d: e.Decision, mirrored: e.Mirrored, cached: e.Cached, err: e.Err})
			w.mu.Unlock()
		},
		Mirror: func(_ context.Context, e kvbreaker.MirrorInfo) {
			w.mu.Lock()
			w.healthy = e.Healthy
			w.events = append(w.events, e)
			w.mu.Unlock()
			w.signal()
			// Never on MirrorStale: that one runs on the caller's
			// goroutine.
			if !e.Healthy && (e.Reason == "lost" || e.Reason == "ended") && w.armed.CompareAndSwap(true, false) {
				close(w.held)
				<-w.release
			}
		},
		MirrorLag: func(_ context.Context, e kvbreaker.MirrorLagInfo) {
			f.lagMu.Lock()
			f.lags = append(f.lags, e.Lag)
			f.lagMu.Unlock()
			select {
			case f.lagged <- struct{}{}:
			default:
			}
		},
	}
}

// last returns the Breaker's latest decision.
func (w *watch) last() decision {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.decisions) == 0 {
		return decision{}
	}
	return w.decisions[len(w.decisions)-1]
}

func (w *watch) state() (healthy bool, events int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.healthy, len(w.events)
}

func (w *watch) describe() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	for _, e := range w.events {
		fmt.Fprintf(&b, " %v/%s", e.Healthy, e.Reason)
		if e.Err != nil {
			fmt.Fprintf(&b, "(%v)", e.Err)
		}
	}
	return b.String()
}

// waitHealthy waits until the mirror has reported healthy after its
// first `after` reports.
func (w *watch) waitHealthy(after int) error {
	timeout := time.NewTimer(w.wait)
	defer timeout.Stop()
	for {
		w.mu.Lock()
		ok := w.healthy && len(w.events) > after
		w.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-w.changed:
		case <-timeout.C:
			return fmt.Errorf("breaker %d: mirror not healthy within %v; reports:%s", w.i, w.wait, w.describe())
		}
	}
}

// Start makes a Breaker with settings s (Mirror set) over each store and
// waits until every mirror is healthy. The Breakers are closed when t
// ends.
func Start(t testing.TB, stores []driver.Store, s kvbreaker.Settings) *Fleet {
	t.Helper()
	return StartWait(t, stores, s, DefaultWait)
}

// StartWait is Start with each wait bounded by wait.
func StartWait(t testing.TB, stores []driver.Store, s kvbreaker.Settings, wait time.Duration) *Fleet {
	t.Helper()
	s.Mirror = true
	if s.FailureThreshold == 0 {
		s.FailureThreshold = kvbreaker.Settings{}.WithDefaults().FailureThreshold
	}
	f := &Fleet{Settings: s, Wait: wait, lagged: make(chan struct{}, 1)}
	for i, st := range stores {
		w := &watch{i: i, wait: wait, changed: make(chan struct{}, 1), held: make(chan struct{}), release: make(chan struct{})}
		bs := s
		bs.Observer = w.observer(f)
		b, err := kvbreaker.New(st, bs)
		if err != nil {
			t.Fatal(err)
		}
		f.w = append(f.w, w)
		f.Breakers = append(f.Breakers, b)
		t.Cleanup(func() {
			w.unhold()
			if err := b.Close(context.Background()); err != nil {
				t.Errorf("breaker %d: Close: %v", i, err)
			}
		})
	}
	for _, w := range f.w {
		if err := w.waitHealthy(0); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// Lags returns the feed delays MirrorLag reported so far, sorted.
func (f *Fleet) Lags() []time.Duration {
	f.lagMu.Lock()
	defer f.lagMu.Unlock()
	l := slices.Clone(f.lags)
	slices.Sort(l)
	return l
}

// lagQuiet: awaitLags stops waiting for the feed delays of writes made
// when no more have arrived for this long (a write decided while a mirror
// was not deciding has none).
const lagQuiet = time.Second

// awaitLags waits until n feed delays have been reported: each arrives
// when the write reaches its writer's mirror, after the write returned.
func (f *Fleet) awaitLags(n int) {
	quiet := time.NewTimer(lagQuiet)
	defer quiet.Stop()
	for {
		f.lagMu.Lock()
		got := len(f.lags)
		f.lagMu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-f.lagged:
			quiet.Reset(lagQuiet)
		case <-quiet.C:
			return
		}
	}
}

// quantile of sorted durations (nearest rank).
func quantile(l []time.Duration, q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	i := int(q*float64(len(l))+0.999999) - 1
	return l[max(0, min(i, len(l)-1))]
}

// PropagationReport is what Propagate measured in its last round.
type PropagationReport struct {
	// LagSamples, LagP50, LagP99 and LagMax: Observer.MirrorLag over the
	// run's writes so far.
	LagSamples             int
	LagP50, LagP99, LagMax time.Duration
	// Bound is PropagationFactor×LagP99.
	Bound time.Duration
	// Arrivals: for each Breaker but the writer, when the opening write
	// reached it, after it was sent: later than its last Send (Min, the
	// start of the last Allow that answered Send) and no later than its
	// first Hold (Max, when that Allow returned).
	Arrivals []Arrival
	// Mirrored counts the first Holds that came from the mirror (the
	// rest were read from the store: a mirror not deciding then).
	Mirrored int
	Rounds   int
}

// Arrival brackets when a write reached a Breaker, from when it was sent.
type Arrival struct{ Min, Max time.Duration }

func (a Arrival) String() string {
	return fmt.Sprintf("%v–%v", a.Min.Round(time.Microsecond), a.Max.Round(time.Microsecond))
}

// late reports whether a Breaker answered Send later than the bound.
func (r PropagationReport) late() bool {
	for _, a := range r.Arrivals {
		if a.Min > r.Bound {
			return true
		}
	}
	return false
}

func (r PropagationReport) String() string {
	return fmt.Sprintf("feed delay over %d writes: p50 %v p99 %v max %v; bound %v; opening write reached the others after %v (%d of %d first Holds from the mirror); round %d",
		r.LagSamples, r.LagP50, r.LagP99, r.LagMax, r.Bound, r.Arrivals, r.Mirrored, len(r.Arrivals), r.Rounds)
}

// Poll is how often the other Breakers ask Allow while Propagate waits
// for their Hold (the runtime's timers may wake them later: a millisecond
// is common).
const Poll = 250 * time.Microsecond

// Propagate measures the feed delay (lagWrites Failures by each Breaker,
// on hosts of its own, one at a time), then has Breaker writer record
// FailureThreshold failures on host while every other Breaker asks Allow
// every Poll, until it answers Hold. No Breaker may answer Send to an
// Allow begun more than PropagationFactor × the p99 feed delay after the
// opening write was sent: its mirror would not have had it by then. (The
// polls' own spacing cannot fail the check: an arrival between two polls
// is bracketed, and only the last Send counts against the bound.) See
// Rounds.
func (f *Fleet) Propagate(t testing.TB, writer int, host string, lagWrites int) PropagationReport {
	t.Helper()
	ctx := t.Context()
	// One write at a time, each Breaker in turn, as the opening write
	// will be: concurrent writes would measure the store's queueing.
	for j := range lagWrites {
		for i, b := range f.Breakers {
			if err := b.Failure(ctx, fmt.Sprintf("%s-lag-%d-%d", host, i, j)); err != nil {
				t.Fatalf("breaker %d: Failure: %v", i, err)
			}
		}
	}
	f.awaitLags(len(f.Breakers) * lagWrites)
	var rep PropagationReport
	for round := 1; round <= Rounds; round++ {
		rep = f.propagateOnce(t, writer, fmt.Sprintf("%s-r%d", host, round))
		rep.Rounds = round
		t.Log(rep)
		if !rep.late() {
			return rep
		}
	}
	t.Errorf("in each of %d rounds a Breaker answered Send more than %d × the p99 feed delay after the opening write was sent: %v", Rounds, PropagationFactor, rep)
	return rep
}

func (f *Fleet) propagateOnce(t testing.TB, writer int, host string) PropagationReport {
	t.Helper()
	ctx := t.Context()
	lags := f.Lags()
	rep := PropagationReport{LagSamples: len(lags), LagP50: quantile(lags, 0.5), LagP99: quantile(lags, 0.99)}
	if len(lags) < 20 {
		t.Fatalf("only %d feed delays measured: too few for a p99", len(lags))
	}
	rep.LagMax = lags[len(lags)-1]
	rep.Bound = PropagationFactor * rep.LagP99

	b := f.Breakers[writer]
	for range f.Settings.FailureThreshold - 1 {
		if err := b.Failure(ctx, host); err != nil {
			t.Fatal(err)
		}
	}
	type poll struct {
		lastSend, firstHold time.Time
		mirrored            bool
	}
	polls := make([]poll, len(f.Breakers))
	start := make(chan struct{})
	pctx, cancel := context.WithTimeout(ctx, f.Wait)
	defer cancel()
	var wg sync.WaitGroup
	for i, o := range f.Breakers {
		if i == writer {
			continue
		}
		wg.Go(func() {
			tick := time.NewTicker(Poll)
			defer tick.Stop()
			<-start
			p := &polls[i]
			for {
				began := time.Now()
				v, err := o.Allow(pctx, host, time.Time{})
				switch {
				case err != nil:
					t.Errorf("breaker %d: Allow: %v", i, err)
					return
				case v.Decision == kvbreaker.Hold:
					p.firstHold, p.mirrored = time.Now(), f.w[i].last().mirrored
					return
				case v.Decision != kvbreaker.Send:
					t.Errorf("breaker %d: Allow = %v before the circuit opened", i, v.Decision)
					return
				}
				p.lastSend = began
				select {
				case <-tick.C:
				case <-pctx.Done():
					t.Errorf("breaker %d: no Hold within %v of the circuit's opening", i, f.Wait)
					return
				}
			}
		})
	}
	close(start)
	sent := time.Now()
	if err := b.Failure(ctx, host); err != nil {
		t.Fatal(err)
	}
	if v, err := b.Allow(ctx, host, time.Time{}); err != nil || v.Decision != kvbreaker.Hold {
		t.Fatalf("the writer's Allow after %d failures = %v, %v; want Hold", f.Settings.FailureThreshold, v.Decision, err)
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i, p := range polls {
		if i == writer {
			continue
		}
		rep.Arrivals = append(rep.Arrivals, Arrival{Min: max(p.lastSend.Sub(sent), 0), Max: p.firstHold.Sub(sent)})
		if p.mirrored {
			rep.Mirrored++
		}
	}
	return rep
}

// Break configures BreakAndChange.
type Break struct {
	// Host is the circuit Writer opens while the feeds are broken; it
	// must have no record before.
	Host string
	// Writer is the Breaker that opens it.
	Writer int
	// Broken are the Breakers whose feeds Do breaks; each must report
	// its mirror unhealthy (lost, or ended).
	Broken []int
	// Do breaks the feeds. It may take the store away and bring it back
	// (a restart): the writes come after it returns.
	Do func(ctx context.Context) error
}

// BreakReport is what BreakAndChange saw.
type BreakReport struct {
	// Reasons: each broken Breaker's unhealthy report.
	Reasons []string
	// StoreDecisions counts the decisions the broken Breakers made, from
	// the store, while their feeds were down; MirrorDecisions those they
	// made from the mirror after the resync.
	StoreDecisions, MirrorDecisions int
	// Resync is the longest time from releasing a feed to its mirror
	// deciding again.
	Resync time.Duration
}

// BreakAndChange breaks the feeds of cfg.Broken, and while they are
// broken has cfg.Writer open cfg.Host; see the package doc.
func (f *Fleet) BreakAndChange(t testing.TB, cfg Break) BreakReport {
	t.Helper()
	ctx := t.Context()
	var rep BreakReport
	marks := make([]int, len(f.w))
	for i, w := range f.w {
		if err := w.waitHealthy(0); err != nil {
			t.Fatal(err)
		}
		_, marks[i] = w.state()
	}
	for _, i := range cfg.Broken {
		f.w[i].armed.Store(true)
	}
	released := false
	release := func() {
		if !released {
			released = true
			for _, i := range cfg.Broken {
				f.w[i].armed.Store(false)
				f.w[i].unhold()
			}
		}
	}
	defer release()
	if err := cfg.Do(ctx); err != nil {
		t.Fatalf("breaking the feeds: %v", err)
	}
	timeout := time.NewTimer(f.Wait)
	defer timeout.Stop()
	for _, i := range cfg.Broken {
		select {
		case <-f.w[i].held:
		case <-timeout.C:
			t.Fatalf("breaker %d: its feed was broken, but its mirror did not report it within %v; reports:%s", i, f.Wait, f.w[i].describe())
		}
		f.w[i].mu.Lock()
		e := f.w[i].events[len(f.w[i].events)-1]
		f.w[i].mu.Unlock()
		rep.Reasons = append(rep.Reasons, fmt.Sprintf("%d: %s (%v)", i, e.Reason, e.Err))
	}

	// The feeds are down, and cannot resynchronise: each decision comes
	// from the store, which holds no record of Host yet, then an open one.
	allow := func(i int, want kvbreaker.Decision, what string) {
		t.Helper()
		v, err := f.Breakers[i].Allow(ctx, cfg.Host, time.Time{})
		d := f.w[i].last()
		rep.StoreDecisions++
		switch {
		case err != nil:
			t.Errorf("breaker %d, feed down, %s: Allow: %v", i, what, err)
		case d.mirrored || d.cached:
			t.Errorf("breaker %d, feed down, %s: decided %v from the mirror (Mirrored %v, Cached %v)", i, what, v.Decision, d.mirrored, d.cached)
		case v.Decision != want:
			t.Errorf("breaker %d, feed down, %s: Allow = %v, the store says %v", i, what, v.Decision, want)
		}
	}
	for _, i := range cfg.Broken {
		allow(i, kvbreaker.Send, "before the circuit opened")
	}
	wctx, cancel := context.WithTimeout(ctx, f.Wait)
	defer cancel()
	w := f.Breakers[cfg.Writer]
	for range f.Settings.FailureThreshold {
		if err := w.Failure(wctx, cfg.Host); err != nil {
			t.Fatalf("writer %d: Failure: %v", cfg.Writer, err)
		}
	}
	if st, err := w.Inspect(wctx, cfg.Host); err != nil || st.State != kvbreaker.StateOpen {
		t.Fatalf("writer %d: Inspect after %d failures = %+v, %v; want open", cfg.Writer, f.Settings.FailureThreshold, st, err)
	}
	for _, i := range cfg.Broken {
		allow(i, kvbreaker.Hold, "after the circuit opened")
	}

	// Let the feeds resynchronise: every Breaker must come to decide from
	// its mirror again, and answer Hold from it.
	released0 := time.Now()
	release()
	for i, o := range f.Breakers {
		broken := slices.Contains(cfg.Broken, i)
		after := 0 // a feed not broken: healthy, as at the start
		if broken {
			// The report after the unhealthy one that was held.
			after = marks[i] + 1
		}
		if err := f.w[i].waitHealthy(after); err != nil {
			t.Fatal(err)
		}
		tick := time.NewTicker(time.Millisecond)
		deadline := time.NewTimer(f.Wait)
		for {
			v, err := o.Allow(ctx, cfg.Host, time.Time{})
			d := f.w[i].last()
			if err != nil {
				t.Fatalf("breaker %d, after the resync: Allow: %v", i, err)
			}
			if d.mirrored && (v.Decision == kvbreaker.Hold || broken) {
				if v.Decision != kvbreaker.Hold {
					// A new snapshot taken after the circuit opened
					// holds it open: a Send is a mirror that resumed
					// past its gap.
					t.Errorf("breaker %d decided %v from its mirror after the resync; the store holds the circuit open", i, v.Decision)
				}
				if broken {
					rep.MirrorDecisions++
					rep.Resync = max(rep.Resync, time.Since(released0))
				}
				break
			}
			// A feed never broken delivers the opening write when it
			// delivers it: until then its mirror may rightly answer Send,
			// and Propagate bounds how late.
			select {
			case <-tick.C:
			case <-deadline.C:
				if d.mirrored {
					t.Fatalf("breaker %d: its feed was never broken, and its mirror still decided %v %v after the resync; the store holds the circuit open", i, v.Decision, f.Wait)
				}
				t.Fatalf("breaker %d: no decision from its mirror within %v of the resync; reports:%s", i, f.Wait, f.w[i].describe())
			}
		}
		tick.Stop()
		deadline.Stop()
	}
	return rep
}

func (r BreakReport) String() string {
	return fmt.Sprintf("feeds lost: %s; %d decisions from the store while down, all agreeing with it; %d from the mirror after the resync, within %v of it",
		strings.Join(r.Reasons, ", "), r.StoreDecisions, r.MirrorDecisions, r.Resync.Round(time.Millisecond))
}
