// Package faultfleet drives a fleet of kvbreaker.Breakers over a real store whose
// traffic goes through a faultproxy injecting faults (answers lost or
// replaced after the server applied the request, slow answers, resets, a
// hung server), and checks what the fleet must still guarantee under them:
//
//   - CheckFailuresOnce: no stored record holds more failures than Failure
//     calls that could have written them (one Failure counted twice shows
//     as its instant stored twice, with no other call to account for it).
//   - CheckProbeWinner: every half-open record in the store was written by
//     an Allow that answered Probe (or returned an error, the outcome being
//     unknown to it): a probe election's winner is never told Hold.
//   - CheckOpenReported: every open record in the store was written by a
//     Failure that reported the opening to OnStateChange (or returned an
//     error).
//   - CheckOneProbe: no second Probe for a restraint: two Probe answers on
//     a host less than RecoveryDelay apart need a Success or Failure on the
//     host between them (atomic stores only).
//   - CheckTransitionsOnce: OnStateChange never reports the same
//     transition of a host twice in a row unless another call on that host
//     reported a transition or failed in between (atomic stores only).
//   - CheckCallTime: every call returns within CallTimeout plus Slack (each
//     call's context has CallTimeout).
//
// How the checks know who wrote what: every Breaker call is given its own
// instant (the fleet's clock hands out distinct milliseconds), so a record's
// failure instants and its RestrainedUntil−RecoveryDelay name the call that
// wrote them. An observer store, reading the same keyspace directly (not
// through the proxy), polls every host; the records it saw are checked once
// every call has returned.
//
// A last-writer-wins store (Traits().Atomic false) cannot keep the probe
// election or transitions single; ChecksFor leaves those checks out.
//
// Use it from a backend's test package:
//
//	rep, err := faultfleet.Run(ctx, faultfleet.Config{
//		NewStore: func(ctx context.Context, worker int) (driver.Store, error) { /* via proxy.Addr() */ },
//		Observer: direct, // same keyspace, not through the proxy
//		Proxy:    proxy,
//		Short:    testing.Short(),
//	})
//	t.Log(rep)
//	if err != nil { t.Fatal(err) }
package faultfleet

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

// Check selects the assertions Run makes.
type Check uint

// The checks; see the package doc.
const (
	CheckFailuresOnce Check = 1 << iota
	CheckProbeWinner
	CheckOpenReported
	CheckOneProbe
	CheckTransitionsOnce
	CheckCallTime

	// CheckAll is every check, for atomic stores.
	CheckAll = CheckFailuresOnce | CheckProbeWinner | CheckOpenReported | CheckOneProbe | CheckTransitionsOnce | CheckCallTime
)

// ChecksFor returns the checks that hold for a store with these traits:
// all of them for an atomic store; without the single-probe and
// single-transition checks for a last-writer-wins one, where concurrent
// workers may each win.
func ChecksFor(t driver.Traits) Check {
	if t.Atomic {
		return CheckAll
	}
	return CheckAll &^ (CheckOneProbe | CheckTransitionsOnce)
}

// Fault selects the faults the runner injects through the proxy.
type Fault uint

// The faults. FaultDrop and FaultFail are the ambiguous outcomes: the
// server applied the request and the client does not learn it.
const (
	// FaultDrop: answers lost after the request was applied (DropNextAnswer
	// now and then, and DropAnswers at DropRate throughout).
	FaultDrop Fault = 1 << iota
	// FaultFail: an applied request answered with FailAnswer.
	FaultFail
	// FaultDelay: answers slowed, some beyond CallTimeout.
	FaultDelay
	// FaultReset: every connection reset at once.
	FaultReset
	// FaultBlackhole: a hung server for a little more than CallTimeout.
	FaultBlackhole

	// FaultAll is every fault.
	FaultAll = FaultDrop | FaultFail | FaultDelay | FaultReset | FaultBlackhole
)

// HTTP500 is the default FailAnswer: a complete HTTP/1.1 500 that closes the
// connection.
var HTTP500 = []byte("HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: 70\r\nConnection: close\r\n\r\n" +
	`{"__type":"com.amazonaws.dynamodb.v20120810#InternalFailure","m":"x"}` + "\n")

// Config configures Run. Zero fields take the defaults given.
type Config struct {
	// NewStore returns worker i's store, whose traffic goes through Proxy.
	// Called once per worker, before the run; the caller closes the
	// stores (e.g. in t.Cleanup). Required.
	NewStore func(ctx context.Context, worker int) (driver.Store, error)
	// Observer reads the same keyspace directly, not through the proxy.
	// Required.
	Observer driver.Store
	// Proxy carries the workers' traffic; nil runs without faults (a
	// control run).
	Proxy *faultproxy.Proxy
	// Faults to inject; default FaultAll.
	Faults Fault
	// FailAnswer is what FaultFail sends the client; default HTTP500.
	FailAnswer []byte
	// DropRate is the fraction of requests whose answer is dropped
	// throughout the run (with FaultDrop); default 0.03, negative for none.
	DropRate float64
	// Checks to make; default ChecksFor(Observer.Traits()).
	Checks Check

	// Workers (default 4), each with its own store and Breaker, over Hosts
	// hosts (default 3) named HostPrefix+"h0"… (default prefix "fleet-").
	Workers    int
	Hosts      int
	HostPrefix string
	// Duration of the run: default 6 s, or 2 s with Short.
	Duration time.Duration
	Short    bool
	// Seed for the workload and the faults; default 1.
	Seed int64

	// Settings for every Breaker. The runner sets Clock and
	// OnStateChange; zero FailureThreshold, FailureWindow, RecoveryDelay,
	// CallTimeout become 2, 2 s, 300 ms, 1 s so that circuits open and
	// probe many times in a short run.
	Settings kvbreaker.Settings
	// Slack is allowed beyond CallTimeout for a call to return; default
	// 500 ms (a loaded machine under -race).
	Slack time.Duration
	// Logf, if set, receives a line per injected fault.
	Logf func(format string, args ...any)
}

// Report is what a run did.
type Report struct {
	// Calls counts Breaker calls by kind ("allow:send", "failure", …) and
	// Errors those that returned an error.
	Calls  map[string]int
	Errors int
	// Transitions counts OnStateChange reports ("closed→open", …).
	Transitions map[string]int
	// Records is the number of distinct records the observer saw.
	Records int
	// MaxCall is the longest call.
	MaxCall time.Duration
	// Proxy is the proxy's counters at the end.
	Proxy faultproxy.Stats
	// Violations are the failed checks, also returned joined by Run.
	Violations []error
}

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "calls %v, errors %d, transitions %v, records seen %d, longest call %v, proxy %+v, violations %d",
		r.Calls, r.Errors, r.Transitions, r.Records, r.MaxCall.Round(time.Millisecond), r.Proxy, len(r.Violations))
	return b.String()
}

// ErrViolation is matched (errors.Is) by every violation Run reports.
var ErrViolation = errors.New("faultfleet: violation")

// ErrNoPower is matched by the violation reported when faults were asked for
// but the proxy lost no answer: the run proved nothing about ambiguity.
var ErrNoPower = errors.New("faultfleet: no answer was lost; the run had no power")

// Run drives the fleet for cfg.Duration and checks it. It returns the report
// and, if any check failed, an error joining every violation (each matching
// ErrViolation); a setup problem is returned alone.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if err := cfg.normalise(); err != nil {
		return Report{}, err
	}
	r := &runner{cfg: cfg, fc: &fleetClock{}, instants: map[int64]*call{}}
	for i := range cfg.Workers {
		st, err := cfg.NewStore(ctx, i)
		if err != nil {
			return Report{}, fmt.Errorf("faultfleet: store of worker %d: %w", i, err)
		}
		w := &worker{r: r, id: i, rng: rand.New(rand.NewSource(cfg.Seed*1000 + int64(i)))}
		s := cfg.Settings
		s.Clock = w.clock
		s.OnStateChange = w.onStateChange
		// A simulated clock says nothing against the store's; the samples
		// would only add calls the checks do not account for.
		s.SkipClockCheck, s.ClockCheckInterval = true, 0
		if w.b, err = kvbreaker.New(st, s); err != nil {
			return Report{}, fmt.Errorf("faultfleet: breaker of worker %d: %w", i, err)
		}
		r.workers = append(r.workers, w)
	}
	for i := range cfg.Hosts {
		r.hosts = append(r.hosts, fmt.Sprintf("%sh%d", cfg.HostPrefix, i))
	}
	r.run(ctx)
	return r.check()
}

func (c *Config) normalise() error {
	if c.NewStore == nil || c.Observer == nil {
		return errors.New("faultfleet: Config needs NewStore and Observer")
	}
	if c.Faults == 0 {
		c.Faults = FaultAll
	}
	if c.FailAnswer == nil {
		c.FailAnswer = HTTP500
	}
	if c.DropRate == 0 {
		c.DropRate = 0.03
	}
	if c.Checks == 0 {
		c.Checks = ChecksFor(c.Observer.Traits())
	}
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.Hosts <= 0 {
		c.Hosts = 3
	}
	if c.HostPrefix == "" {
		c.HostPrefix = "fleet-"
	}
	if c.Duration <= 0 {
		c.Duration = 6 * time.Second
		if c.Short {
			c.Duration = 2 * time.Second
		}
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	s := &c.Settings
	if s.FailureThreshold == 0 {
		s.FailureThreshold = 2
	}
	if s.FailureWindow == 0 {
		s.FailureWindow = 2 * time.Second
	}
	if s.RecoveryDelay == 0 {
		s.RecoveryDelay = 300 * time.Millisecond
	}
	if s.CallTimeout == 0 {
		s.CallTimeout = time.Second
	}
	if c.Slack <= 0 {
		c.Slack = 500 * time.Millisecond
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return nil
}

// fleetClock hands out distinct millisecond instants that follow real time.
type fleetClock struct {
	mu   sync.Mutex
	last time.Time
}

func (c *fleetClock) next() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := time.Now().Round(0).Truncate(time.Millisecond)
	if !t.After(c.last) {
		t = c.last.Add(time.Millisecond)
	}
	c.last = t
	return t
}

// call is one Breaker call.
type call struct {
	worker     int
	host       string
	kind       string // allow, failure, success
	at         time.Time
	decision   kvbreaker.Decision
	err        error
	start, end time.Time // real time, monotonic
	reported   string    // "from→to" or ""
}

type runner struct {
	cfg     Config
	fc      *fleetClock
	workers []*worker
	hosts   []string
	begin   time.Time

	mu       sync.Mutex
	calls    []*call
	instants map[int64]*call // by at, Unix ms
	seen     []seen
	seenVer  map[string]driver.Version
}

type seen struct {
	host string
	rec  record.Record
	err  error     // undecodable
	at   time.Time // real time the read answered
}

type worker struct {
	r   *runner
	id  int
	b   *kvbreaker.Breaker
	rng *rand.Rand
	cur *call // the call in progress: clock and callback read it
}

func (w *worker) clock() time.Time { return w.cur.at }

func (w *worker) onStateChange(host string, from, to kvbreaker.State) {
	c := w.cur
	if c.reported != "" {
		c.reported += "+" // a second report in one call: always wrong
	}
	c.reported += from.String() + "→" + to.String()
}

// do runs one Breaker call with its own instant and context.
func (w *worker) do(ctx context.Context, host, kind string, f func(context.Context) (kvbreaker.Decision, error)) *call {
	c := &call{worker: w.id, host: host, kind: kind, at: w.r.fc.next()}
	w.cur = c
	cctx, cancel := context.WithTimeout(ctx, w.r.cfg.Settings.CallTimeout)
	c.start = time.Now()
	c.decision, c.err = f(cctx)
	c.end = time.Now()
	cancel()
	w.r.mu.Lock()
	w.r.calls = append(w.r.calls, c)
	w.r.instants[c.at.UnixMilli()] = c
	w.r.mu.Unlock()
	return c
}

// down says whether host fails deliveries now: each host is down two
// phases of three, shifted per host, so circuits open, probe, fail and
// close throughout.
func (r *runner) down(host int) bool {
	phase := time.Since(r.begin) / (700 * time.Millisecond)
	return (int(phase)+host)%3 != 0
}

func (w *worker) loop(ctx context.Context, deadline time.Time) {
	r := w.r
	for time.Now().Before(deadline) && ctx.Err() == nil {
		hi := w.rng.Intn(len(r.hosts))
		host := r.hosts[hi]
		c := w.do(ctx, host, "allow", func(ctx context.Context) (kvbreaker.Decision, error) {
			v, err := w.b.Allow(ctx, host, time.Time{})
			return v.Decision, err
		})
		if c.decision == kvbreaker.Send || c.decision == kvbreaker.Probe {
			if r.down(hi) {
				w.do(ctx, host, "failure", func(ctx context.Context) (kvbreaker.Decision, error) { return 0, w.b.Failure(ctx, host) })
			} else {
				w.do(ctx, host, "success", func(ctx context.Context) (kvbreaker.Decision, error) { return 0, w.b.Success(ctx, host) })
			}
		}
		// Pace the load (not a wait for logic): a few ms between messages.
		time.Sleep(time.Duration(1+w.rng.Intn(4)) * time.Millisecond)
	}
}

func (r *runner) run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.begin = time.Now()
	deadline := r.begin.Add(r.cfg.Duration)
	r.seenVer = map[string]driver.Version{}
	var wg sync.WaitGroup
	for _, w := range r.workers {
		wg.Go(func() { w.loop(ctx, deadline) })
	}
	obsDone := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { r.observe(ctx, obsDone) })
	if p := r.cfg.Proxy; p != nil {
		bg.Go(func() { r.inject(ctx, p, deadline) })
	}
	wg.Wait()
	if r.cfg.Proxy != nil {
		r.cfg.Proxy.Heal()
	}
	close(obsDone)
	bg.Wait()
}

// observe polls every host through the observer store until done, keeping
// each distinct record.
func (r *runner) observe(ctx context.Context, done <-chan struct{}) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		for _, h := range r.hosts {
			r.look(ctx, h)
		}
		select {
		case <-done:
			for _, h := range r.hosts {
				r.look(ctx, h)
			}
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *runner) look(ctx context.Context, host string) {
	cctx, cancel := context.WithTimeout(ctx, r.cfg.Settings.CallTimeout)
	defer cancel()
	v, ver, err := r.cfg.Observer.Get(cctx, host)
	at := time.Now() // the writer began before the read answered
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seenVer[host] == ver {
		return
	}
	r.seenVer[host] = ver
	rec, err := record.DecodeRecord(v)
	r.seen = append(r.seen, seen{host: host, rec: rec, err: err, at: at})
}

// inject schedules faults on the proxy until deadline.
func (r *runner) inject(ctx context.Context, p *faultproxy.Proxy, deadline time.Time) {
	f := r.cfg.Faults
	rng := rand.New(rand.NewSource(r.cfg.Seed))
	if f&FaultDrop != 0 && r.cfg.DropRate > 0 {
		p.DropAnswers(r.cfg.DropRate, r.cfg.Seed)
	}
	var kinds []Fault
	for _, k := range []Fault{FaultDrop, FaultFail, FaultDelay, FaultReset, FaultBlackhole} {
		if f&k != 0 {
			kinds = append(kinds, k)
		}
	}
	ct := r.cfg.Settings.CallTimeout
	sleep := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for time.Now().Add(ct).Before(deadline) {
		if !sleep(time.Duration(100+rng.Intn(200)) * time.Millisecond) {
			return
		}
		switch kinds[rng.Intn(len(kinds))] {
		case FaultDrop:
			r.cfg.Logf("faultfleet: drop next answers")
			for range 2 {
				if err := p.DropNextAnswer(ctx); err != nil {
					return // ctx ended
				}
			}
		case FaultFail:
			r.cfg.Logf("faultfleet: fail next answer")
			p.FailNextAnswer(r.cfg.FailAnswer)
		case FaultDelay:
			d := ct / 10
			if rng.Intn(3) == 0 {
				d = ct + ct/2 // beyond the call's deadline
			}
			r.cfg.Logf("faultfleet: delay answers by %v", d)
			p.Delay(d)
			sleep(300 * time.Millisecond)
			p.Delay(0)
		case FaultReset:
			r.cfg.Logf("faultfleet: reset all connections")
			p.ResetAll()
		case FaultBlackhole:
			r.cfg.Logf("faultfleet: blackhole")
			p.Blackhole(true)
			sleep(ct + ct/10)
			p.Blackhole(false)
		}
	}
}

func (r *runner) check() (Report, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cfg := r.cfg
	rep := Report{Calls: map[string]int{}, Transitions: map[string]int{}, Records: len(r.seen)}
	if cfg.Proxy != nil {
		rep.Proxy = cfg.Proxy.Stats()
	}
	var v []error
	bad := func(format string, args ...any) {
		v = append(v, fmt.Errorf("%w: "+format, append([]any{ErrViolation}, args...)...))
	}
	rd := cfg.Settings.RecoveryDelay
	byHost := map[string][]*call{}
	for _, c := range r.calls {
		kind := c.kind
		if kind == "allow" {
			kind += ":" + c.decision.String()
		}
		rep.Calls[kind]++
		if c.err != nil {
			rep.Errors++
		}
		if c.reported != "" {
			rep.Transitions[c.reported]++
		}
		rep.MaxCall = max(rep.MaxCall, c.end.Sub(c.start))
		byHost[c.host] = append(byHost[c.host], c)
		if cfg.Checks&CheckCallTime != 0 {
			if el := c.end.Sub(c.start); el > cfg.Settings.CallTimeout+cfg.Slack {
				bad("%s %s by worker %d took %v, more than CallTimeout %v + %v", c.kind, c.host, c.worker, el, cfg.Settings.CallTimeout, cfg.Slack)
			}
		}
		if strings.Contains(c.reported, "+") {
			bad("%s %s by worker %d reported several transitions: %s", c.kind, c.host, c.worker, c.reported)
		}
	}
	// The records the observer saw, each naming the calls that wrote it.
	for _, s := range r.seen {
		rec := s.rec
		if s.err != nil {
			bad("host %s: stored record does not decode: %v", s.host, s.err)
			continue
		}
		if cfg.Checks&CheckFailuresOnce != 0 {
			if err := failuresOnce(s, byHost[s.host]); err != nil {
				v = append(v, err)
			}
		}
		if rec.RestrainedUntil.IsZero() {
			continue
		}
		at := rec.RestrainedUntil.Add(-rd)
		c := r.instants[at.UnixMilli()]
		switch kvbreaker.State(rec.State()) {
		case kvbreaker.StateHalfOpen:
			if cfg.Checks&CheckProbeWinner == 0 {
				break
			}
			switch {
			case c == nil || c.kind != "allow":
				bad("host %s: half-open record (restrained until %s) written by no Allow", s.host, rec.RestrainedUntil.Format(time.StampMilli))
			case c.decision != kvbreaker.Probe && c.err == nil:
				bad("host %s: worker %d's Allow at %s won the probe election (the store holds its half-open record) but was told %v", s.host, c.worker, at.Format(time.StampMilli), c.decision)
			}
		case kvbreaker.StateOpen:
			if cfg.Checks&CheckOpenReported == 0 {
				break
			}
			switch {
			case c == nil || c.kind != "failure":
				bad("host %s: open record (restrained until %s) written by no Failure", s.host, rec.RestrainedUntil.Format(time.StampMilli))
			case !strings.HasSuffix(c.reported, "→open") && c.err == nil:
				bad("host %s: worker %d's Failure at %s opened the circuit (the store holds its open record) but OnStateChange was told %q", s.host, c.worker, at.Format(time.StampMilli), c.reported)
			}
		}
	}
	for host, calls := range byHost {
		sort.Slice(calls, func(i, j int) bool { return calls[i].start.Before(calls[j].start) })
		if cfg.Checks&CheckOneProbe != 0 {
			v = append(v, oneProbe(host, calls, rd)...)
		}
		if cfg.Checks&CheckTransitionsOnce != 0 {
			v = append(v, transitionsOnce(host, calls)...)
		}
	}
	if cfg.Proxy != nil && cfg.Faults&(FaultDrop|FaultFail) != 0 && rep.Proxy.Dropped+rep.Proxy.Failed == 0 {
		v = append(v, fmt.Errorf("%w: %w (proxy %+v)", ErrViolation, ErrNoPower, rep.Proxy))
	}
	rep.Violations = v
	return rep, errors.Join(v...)
}

// failuresOnce checks that the failures of a stored record can be matched
// to distinct Failure calls on the host that began before the record was
// read, each stored instant at or before its call's instant. At or before:
// core clamps an instant later than the writer's now to that now,
// so a concurrent call's failure may be stored at an earlier call's instant
// and equal instants alone do not prove a double count. The i-th newest
// stored failure needs at least i such calls at or after it.
func failuresOnce(s seen, calls []*call) error {
	var ats []time.Time
	for _, c := range calls {
		if c.kind == "failure" && c.start.Before(s.at) {
			ats = append(ats, c.at)
		}
	}
	sort.Slice(ats, func(i, j int) bool { return ats[i].After(ats[j]) })
	fs := slices.Clone(s.rec.Failures)
	slices.Reverse(fs) // newest first
	for i, f := range fs {
		if i >= len(ats) || ats[i].Before(f) {
			return fmt.Errorf("%w: host %s: record holds %d failures at or after %s %v but only %d Failure calls at or after it had begun: a failure counted twice",
				ErrViolation, s.host, i+1, f.Format(time.StampMilli), stamps(s.rec.Failures), countAtOrAfter(ats, f))
		}
	}
	return nil
}

func countAtOrAfter(ats []time.Time, f time.Time) int {
	n := 0
	for _, a := range ats {
		if !a.Before(f) {
			n++
		}
	}
	return n
}

// oneProbe: two Probe answers less than rd apart need a Success or Failure
// on the host overlapping the interval between them (which ended the first
// probe's half-open state).
func oneProbe(host string, calls []*call, rd time.Duration) []error {
	var v []error
	var last *call
	for _, c := range calls {
		if c.kind != "allow" || c.decision != kvbreaker.Probe {
			continue
		}
		if last != nil && c.at.Sub(last.at) < rd && !overlapping(calls, last, c, func(o *call) bool { return o.kind != "allow" }) {
			v = append(v, fmt.Errorf("%w: host %s: workers %d and %d both told Probe (at %s and %s, %v apart, RecoveryDelay %v) with no Success or Failure between",
				ErrViolation, host, last.worker, c.worker, last.at.Format(time.StampMilli), c.at.Format(time.StampMilli), c.at.Sub(last.at), rd))
		}
		last = c
	}
	return v
}

// transitionsOnce: the same transition reported twice in a row on a host
// needs another call between them that reported one or failed.
func transitionsOnce(host string, calls []*call) []error {
	var v []error
	var last *call
	for _, c := range calls {
		if c.reported == "" {
			continue
		}
		if last != nil && last.reported == c.reported &&
			!overlapping(calls, last, c, func(o *call) bool { return o != last && (o.reported != "" || o.err != nil) }) {
			v = append(v, fmt.Errorf("%w: host %s: %s reported twice in a row (worker %d's %s at %s, worker %d's %s at %s) with nothing between",
				ErrViolation, host, c.reported, last.worker, last.kind, last.at.Format(time.StampMilli), c.worker, c.kind, c.at.Format(time.StampMilli)))
		}
		last = c
	}
	return v
}

// overlapping reports whether some call of calls other than a and b that
// matches ok ran while [a.start, b.end] did.
func overlapping(calls []*call, a, b *call, ok func(*call) bool) bool {
	return slices.ContainsFunc(calls, func(o *call) bool {
		return o != a && o != b && ok(o) && o.start.Before(b.end) && o.end.After(a.start)
	})
}

func stamps(ts []time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Format(time.StampMilli)
	}
	return out
}
