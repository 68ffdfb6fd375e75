// Package robustness runs a fleet of kvbreaker.Breakers against a real,
// faulty store and checks the fleet's promises on the recorded history,
// after the manner of etcd's robustness tests and Jepsen.
//
// Run starts Workers workers, each with its own store (its own client and
// connections, from Config.NewStore) and its own Breaker, delivering to
// simulated hosts that die and recover. Faults are injected on a schedule
// drawn from the seed (Schedule), by the store's Config.Inject (kill the
// leader, partition a member, pause…). Every Breaker call and every store
// call beneath it is recorded with its start, end and outcome. When the
// last fault has healed the hosts take their final health (the first
// Config.DeadHosts dead, the rest alive) and the fleet runs on for
// Config.Recovery. Then the checks run on the history:
//
//   - failures-counted-once: every failure instant a written record holds
//     was read by one Failure call, which put it in at most once.
//   - one-probe-per-restraint: Probe answers on a host are at least
//     RecoveryDelay apart on the fleet clock (atomic stores: a second
//     probe needs a new restraint, and a restraint lasts RecoveryDelay).
//   - call-time: no Breaker or store call lasts longer than CallTimeout
//     plus Config.Slack (each Breaker call's context has CallTimeout); a
//     call that spans stalls of the whole process (History.Stalls: the
//     machine's load) covering its overrun is inconclusive.
//   - recovery: from Settle + RecoveryDelay + Slack after the heal, a
//     healthy host is never held and a dead host never sent to.
//   - half-open-bound: a circuit made half-open once the store is healthy
//     (Settle after the heal) leaves half-open within RecoveryDelay plus
//     Slack.
//   - linearizable: each key's Get, CompareAndSwap and CompareAndDelete
//     history is linearizable (porcupine) against a versioned register
//     whose entry may vanish once its TTL has passed.
//
// A violation names its invariant and the seed; the history is written to
// a JSON file whose path the error gives. The seed replays the schedule of
// faults and host health, not the interleaving of the workers' calls.
package robustness

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
)

// The flags of a test binary that runs the harness: go test … -args -seed N.
var (
	flagSeed  = flag.Int64("seed", 0, "robustness: replay this seed (0: one from the time, printed)")
	flagSeeds = flag.Int("seeds", 1, "robustness: run this many seeds in a row")
	flagFault = flag.Duration("faultphase", 0, "robustness: how long faults are injected (0: the test's default)")
)

// Seeds returns the seeds to run: -seed alone, or -seeds of them starting
// at -seed (or at one drawn from the time).
func Seeds() []int64 {
	first := *flagSeed
	if first == 0 {
		first = time.Now().UnixNano() % 1_000_000_000
	}
	out := make([]int64, max(*flagSeeds, 1))
	for i := range out {
		out[i] = first + int64(i)
	}
	return out
}

// FaultPhase returns -faultphase, or def when it is not set.
func FaultPhase(def time.Duration) time.Duration {
	if *flagFault > 0 {
		return *flagFault
	}
	return def
}

// Caller is what a worker calls: a *kvbreaker.Breaker, or a wrapper with a
// seeded bug (the negative controls).
type Caller interface {
	Allow(ctx context.Context, host string, heldSince time.Time) (kvbreaker.Verdict, error)
	Failure(ctx context.Context, host string) error
	Success(ctx context.Context, host string) error
}

// Config configures Run. Zero fields take the defaults given.
type Config struct {
	// Store names the store in messages and the history file ("etcd").
	Store string
	// Seed draws the fault schedule and the hosts' health. Required.
	Seed int64
	// NewStore returns worker i's store, with its own client. Required;
	// the caller closes the stores.
	NewStore func(ctx context.Context, worker int) (driver.Store, error)
	// Faults are the kinds Schedule draws from; Inject injects one and
	// returns the function that heals it. Without Inject no fault is
	// injected and the fault phase is a plain run.
	Faults []string
	Inject func(ctx context.Context, f Fault) (heal func(context.Context) error, err error)
	// FaultPhase: how long faults are injected; default 10 s.
	FaultPhase time.Duration
	// Settle: how long after the heal the store counts as healthy (its
	// clients reconnected); default 3 s.
	Settle time.Duration
	// Recovery: how long the fleet runs after the heal; default Settle +
	// 3 × RecoveryDelay + 2 × Slack, enough for the recovery check to see
	// calls past its bound.
	Recovery time.Duration
	// Workers (default 4) over Hosts hosts (default 4), of which DeadHosts
	// (default 1) are dead after the heal.
	Workers, Hosts, DeadHosts int
	// Pace: each worker's pause between calls; default 10 ms.
	Pace time.Duration
	// Settings for every Breaker; the harness sets Clock and
	// SkipClockCheck. Zero FailureThreshold, FailureWindow, RecoveryDelay
	// and CallTimeout become 3, 2 s, 1 s and 1 s.
	Settings kvbreaker.Settings
	// Slack beyond CallTimeout (and RecoveryDelay) that a loaded machine
	// may add; default 1 s.
	Slack time.Duration
	// WrapStore and WrapBreaker build the negative controls: a broken
	// adapter (beneath the recorder) or a Breaker with a seeded bug.
	WrapStore   func(worker int, s driver.Store) driver.Store
	WrapBreaker func(worker int, b Caller) Caller
	// LosesAckedWrites declares that the store may lose writes it
	// acknowledged (Redis's asynchronous replication across a failover).
	// The run then measures the loss (Report.LostWrites, LostFailures,
	// SecondProbes), and a one-probe-per-restraint or linearizable finding
	// on a key that lost an acknowledged write, or a half-open-bound
	// finding on a stretch during which a lost write was made, is reported
	// in Report.Allowed instead of failing the run. Other findings, and
	// every other invariant, still fail it.
	LosesAckedWrites bool
	// HistoryDir receives the history file on failure; default os.TempDir().
	HistoryDir string
	// LinearizeTimeout bounds porcupine's search per key; default 20 s.
	LinearizeTimeout time.Duration
	// Logf, if set, receives a line per fault.
	Logf func(format string, args ...any)
}

func (c *Config) normalise() error {
	if c.NewStore == nil {
		return errors.New("robustness: Config.NewStore is required")
	}
	if c.Seed == 0 {
		return errors.New("robustness: Config.Seed is required (and printed, so a failure replays)")
	}
	s := &c.Settings
	s.FailureThreshold = cmp(s.FailureThreshold, 3)
	s.FailureWindow = cmp(s.FailureWindow, 2*time.Second)
	s.RecoveryDelay = cmp(s.RecoveryDelay, time.Second)
	s.CallTimeout = cmp(s.CallTimeout, time.Second)
	s.SkipClockCheck = true
	c.Store = cmp(c.Store, "store")
	c.FaultPhase = cmp(c.FaultPhase, 10*time.Second)
	c.Settle = cmp(c.Settle, 3*time.Second)
	c.Slack = cmp(c.Slack, time.Second)
	c.Recovery = cmp(c.Recovery, c.Settle+3*s.RecoveryDelay+2*c.Slack)
	c.Workers = cmp(c.Workers, 4)
	c.Hosts = cmp(c.Hosts, 4)
	c.DeadHosts = cmp(c.DeadHosts, 1)
	c.Pace = cmp(c.Pace, 10*time.Millisecond)
	c.LinearizeTimeout = cmp(c.LinearizeTimeout, 20*time.Second)
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if c.DeadHosts > c.Hosts {
		return fmt.Errorf("robustness: %d dead hosts of %d", c.DeadHosts, c.Hosts)
	}
	return nil
}

func cmp[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Fault is one fault of a schedule: its kind, a random target the injector
// reduces to what it has (a member index), and when (since the run's
// start) and for how long.
type Fault struct {
	Kind   string        `json:"kind"`
	Target int           `json:"target"`
	At     time.Duration `json:"at"`
	For    time.Duration `json:"for"`
}

// Schedule draws from seed a sequence of faults of the given kinds within
// phase: one at a time, each for 1–3 s, with 0.5–1.5 s of health between.
func Schedule(seed int64, kinds []string, phase time.Duration) []Fault {
	if len(kinds) == 0 {
		return nil
	}
	rng := rand.New(rand.NewSource(seed))
	var out []Fault
	at := between(rng, 500*time.Millisecond, 1500*time.Millisecond)
	for {
		d := between(rng, time.Second, 3*time.Second)
		if at+d > phase && len(out) == 0 && at+time.Second <= phase {
			// A short phase still gets its one fault, cut to fit; a
			// longer phase's schedule is unchanged, so its seeds replay.
			d = phase - at
		}
		if at+d > phase {
			return out
		}
		out = append(out, Fault{Kind: kinds[rng.Intn(len(kinds))], Target: rng.Intn(1 << 16), At: at, For: d})
		at += d + between(rng, 500*time.Millisecond, 1500*time.Millisecond)
	}
}

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int63n(int64(hi-lo)))
}

// hostPlan is each host's health: dead in the intervals drawn from the
// seed until the heal, then as its final health says.
type hostPlan struct {
	dead  [][2]time.Duration
	final bool // dead after the heal
}

func plans(seed int64, hosts, deadHosts int, phase time.Duration) []hostPlan {
	rng := rand.New(rand.NewSource(seed ^ 0x5eed))
	out := make([]hostPlan, hosts)
	for i := range out {
		out[i].final = i < deadHosts
		// Every host dies at least once, long enough to open its
		// circuit, so every final state is reached from an open one.
		at := between(rng, 0, time.Second)
		for at < phase {
			d := between(rng, time.Second, 3*time.Second)
			out[i].dead = append(out[i].dead, [2]time.Duration{at, at + d})
			at += d + between(rng, time.Second, 3*time.Second)
		}
	}
	return out
}

func (p hostPlan) deadAt(t time.Duration, healed bool) bool {
	if healed {
		return p.final
	}
	for _, iv := range p.dead {
		if t >= iv[0] && t < iv[1] {
			return true
		}
	}
	return false
}

// Report is what a run did and found.
type Report struct {
	Seed       int64
	Store      string
	Faults     int
	FaultKinds map[string]int
	Calls      int // Breaker calls
	StoreCalls int
	Decisions  map[string]int
	Errors     int
	// Violations are the failed checks, also returned joined by Run.
	Violations []error
	// Inconclusive: checks that could not decide (porcupine's timeout).
	Inconclusive []string
	// The cost of lost acknowledged writes, measured on every run: writes
	// acknowledged (a compare-and-swap or delete that succeeded) that a
	// call started after their answer contradicts: it finds the key at an
	// older version than a write created, absent although no delete came
	// between and no write's TTL can have passed, or at the version a
	// delete removed; the failure instants the lost compare-and-swaps held
	// that no later record holds; the second probes
	// (one-probe-per-restraint findings) on keys that lost a write.
	LostWrites, LostFailures, SecondProbes int
	// Allowed are the findings Config.LosesAckedWrites let through.
	Allowed []string
	// HistoryFile is where the history went (on failure).
	HistoryFile string
	Elapsed     time.Duration
}

func (r Report) String() string {
	return fmt.Sprintf("%s seed %d: %d faults %v, %d Breaker calls %v (%d errors), %d store calls, %d violations, %d inconclusive %v; "+
		"lost acknowledged writes %d (failures lost %d, second probes %d), %d allowed findings; %v",
		r.Store, r.Seed, r.Faults, r.FaultKinds, r.Calls, r.Decisions, r.Errors, r.StoreCalls, len(r.Violations), len(r.Inconclusive), r.Inconclusive,
		r.LostWrites, r.LostFailures, r.SecondProbes, len(r.Allowed), r.Elapsed.Round(100*time.Millisecond))
}

// ErrViolation is matched (errors.Is) by every violation Run reports.
var ErrViolation = errors.New("robustness: invariant violated")

// Run drives the fleet through the fault schedule and the recovery phase,
// checks the history, and returns the report and, if a check failed, an
// error joining every violation (each matching ErrViolation) that names
// the history file. A setup problem is returned alone.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if err := cfg.normalise(); err != nil {
		return Report{}, err
	}
	h := &History{Seed: cfg.Seed, Store: cfg.Store}
	rep := Report{Seed: cfg.Seed, Store: cfg.Store, FaultKinds: map[string]int{}, Decisions: map[string]int{}}
	fleet := &fleetClock{}
	type worker struct {
		clock *workerClock
		b     Caller
		close func(context.Context) error
	}
	workers := make([]worker, cfg.Workers)
	atomic := true
	closeAll := func() {
		for _, w := range workers {
			if w.close != nil {
				_ = w.close(context.WithoutCancel(ctx))
			}
		}
	}
	defer closeAll()
	for i := range workers {
		st, err := cfg.NewStore(ctx, i)
		if err != nil {
			return rep, fmt.Errorf("robustness: worker %d's store: %w", i, err)
		}
		if cfg.WrapStore != nil {
			st = cfg.WrapStore(i, st)
		}
		atomic = atomic && st.Traits().Atomic
		st = &recordingStore{Store: st, h: h, worker: i}
		wc := &workerClock{fleet: fleet}
		s := cfg.Settings
		s.Clock = wc.now
		b, err := kvbreaker.New(st, s)
		if err != nil {
			return rep, fmt.Errorf("robustness: worker %d's Breaker: %w", i, err)
		}
		var c Caller = b
		if cfg.WrapBreaker != nil {
			c = cfg.WrapBreaker(i, b)
		}
		workers[i] = worker{clock: wc, b: c, close: b.Close}
	}
	hosts := plans(cfg.Seed, cfg.Hosts, cfg.DeadHosts, cfg.FaultPhase)
	hostName := func(i int) string { return fmt.Sprintf("robust-%d-h%d", cfg.Seed, i) }
	schedule := Schedule(cfg.Seed, cfg.Faults, cfg.FaultPhase)
	if cfg.Inject == nil {
		schedule = nil
	}

	var healed sync.WaitGroup // the fault goroutine's end
	var heal struct {
		sync.Mutex
		done bool
	}
	isHealed := func() bool { heal.Lock(); defer heal.Unlock(); return heal.done }
	stop := make(chan struct{})
	h.start = time.Now()
	var wg sync.WaitGroup
	watchFrom := h.since()
	wg.Go(func() { h.watchStalls(watchFrom, stop, ctx.Done()) })
	for i, w := range workers {
		rng := rand.New(rand.NewSource(cfg.Seed*31 + int64(i)))
		wg.Go(func() {
			timer := time.NewTimer(cfg.Pace)
			defer timer.Stop()
			for {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				case <-timer.C:
				}
				hi := rng.Intn(cfg.Hosts)
				host := hostName(hi)
				call := func(op Op, f func(ctx context.Context) (string, error)) (string, error) {
					cctx, cancel := context.WithTimeout(ctx, cfg.Settings.CallTimeout)
					defer cancel()
					e := Event{Worker: i, Op: op, Key: host, Start: h.since()}
					w.clock.begin(op)
					d, err := f(cctx)
					e.End, e.Now, e.Decision = h.since(), w.clock.take(), d
					if err != nil {
						e.Err = err.Error()
					}
					h.add(e)
					return d, err
				}
				var v kvbreaker.Verdict
				_, err := call(OpAllow, func(ctx context.Context) (string, error) {
					var err error
					v, err = w.b.Allow(ctx, host, time.Time{})
					return v.Decision.String(), err
				})
				if ctx.Err() == nil && (v.Decision == kvbreaker.Send || v.Decision == kvbreaker.Probe) {
					dead := hosts[hi].deadAt(h.since(), isHealed())
					if dead {
						_, _ = call(OpFailure, func(ctx context.Context) (string, error) { return "", w.b.Failure(ctx, host) })
					} else {
						_, _ = call(OpSuccess, func(ctx context.Context) (string, error) { return "", w.b.Success(ctx, host) })
					}
				}
				_ = err
				timer.Reset(cfg.Pace)
			}
		})
	}

	// The fault schedule, then the heal.
	healed.Go(func() {
		defer func() {
			h.mu.Lock()
			h.Heal = h.since()
			h.mu.Unlock()
			heal.Lock()
			heal.done = true
			heal.Unlock()
		}()
		for _, f := range schedule {
			if !waitUntil(ctx, h, f.At) {
				return
			}
			fe := FaultEvent{Fault: f, Injected: h.since()}
			undo, err := cfg.Inject(ctx, f)
			if err != nil {
				fe.Err = err.Error()
				cfg.Logf("fault %s (target %d) at %v: %v", f.Kind, f.Target, fe.Injected.Round(time.Millisecond), err)
			}
			waitUntil(ctx, h, f.At+f.For)
			if undo != nil {
				if err := undo(context.WithoutCancel(ctx)); err != nil {
					fe.Err = strings.TrimPrefix(fe.Err+"; heal: "+err.Error(), "; ")
				}
			}
			fe.Healed = h.since()
			cfg.Logf("fault %s (target %d): %v–%v %s", f.Kind, f.Target, fe.Injected.Round(time.Millisecond), fe.Healed.Round(time.Millisecond), fe.Err)
			h.mu.Lock()
			h.Faults = append(h.Faults, fe)
			h.mu.Unlock()
		}
		waitUntil(ctx, h, cfg.FaultPhase)
	})
	healed.Wait()
	waitUntil(ctx, h, h.Heal+cfg.Recovery)
	close(stop)
	wg.Wait()
	h.End = h.since()
	if err := ctx.Err(); err != nil {
		return rep, err
	}

	rep.Elapsed = h.End
	for _, f := range h.Faults {
		rep.Faults++
		rep.FaultKinds[f.Kind]++
	}
	for _, e := range h.Events {
		switch e.Op {
		case OpAllow, OpFailure, OpSuccess:
			rep.Calls++
			if e.Err != "" {
				rep.Errors++
			}
			if e.Op == OpAllow {
				rep.Decisions[e.Decision]++
			}
		default:
			rep.StoreCalls++
		}
	}
	c := checker{cfg: &cfg, h: h, hosts: hosts, hostName: hostName, atomic: atomic}
	c.run()
	rep.Violations, rep.Inconclusive, rep.Allowed = c.violations, c.inconclusive, c.allowed
	rep.LostWrites, rep.LostFailures, rep.SecondProbes = c.lostWrites, c.lostFailures, c.secondProbes
	if len(c.violations) == 0 {
		return rep, nil
	}
	path, err := h.WriteFile(cfg.HistoryDir)
	if err != nil {
		path = "(not written: " + err.Error() + ")"
	}
	rep.HistoryFile = path
	return rep, fmt.Errorf("%w\nhistory: %s; replay: -seed %d", errors.Join(c.violations...), path, cfg.Seed)
}

// waitUntil waits until the run has lasted d; false if ctx ended first.
func waitUntil(ctx context.Context, h *History, d time.Duration) bool {
	t := time.NewTimer(d - h.since())
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
