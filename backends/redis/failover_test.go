package redis_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

var failoverRounds = flag.Int("failover.rounds", 0, "TestSentinelFailover, TestClusterFailover: the longer run: also min-replicas-to-write, and this many failovers under load (kill or pause, drawn from -failover.seed); 0: the short run, one kill")
var failoverSeed = flag.Uint64("failover.seed", 0, "seed of the -failover.rounds schedule; 0: from the time (printed)")

// The shared primary, replica and three Sentinels of the Sentinel tests,
// started on first use and closed by TestMain.
var (
	replOnce sync.Once
	repl     *redistest.Replicated
	replErr  error
)

// fastSync starts a replica's full sync at once: Redis's default
// diskless sync waits 5 s for more replicas to join one transfer, which a
// restarted primary, now a replica, would wait on every time.
var fastSync = []string{"--repl-diskless-sync-delay", "0"}

func replicated(t *testing.T) *redistest.Replicated {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a primary, a replica and three Sentinels and fails over")
	}
	replOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		repl, replErr = redistest.StartReplicated(ctx, redistest.ReplicatedOptions{ServerArgs: fastSync})
	})
	if replErr != nil {
		t.Fatal(replErr)
	}
	return repl
}

func closeReplicated() {
	if repl != nil {
		repl.Close()
	}
}

// failoverClient is a go-redis failover client of r's Sentinels, closed
// when t ends: it asks them for the primary on every new connection and
// drops its connections to a demoted one.
func failoverClient(t testing.TB, r *redistest.Replicated) *goredis.Client {
	c := goredis.NewFailoverClient(&goredis.FailoverOptions{
		MasterName:            redistest.MasterName,
		SentinelAddrs:         r.SentinelAddrs(),
		ContextTimeoutEnabled: true,
		DialTimeout:           300 * time.Millisecond,
		MinRetryBackoff:       time.Millisecond,
		MaxRetryBackoff:       20 * time.Millisecond,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

const (
	callTimeout = 500 * time.Millisecond
	// callSlack is what a call may take beyond CallTimeout on a loaded
	// 2-core machine (the go-redis dial to a Sentinel, scheduling).
	callSlack = time.Second
)

// worker is one process of the fleet: its own failover client and a
// Breaker per purpose, all on the fleet's clock.
type worker struct {
	id                 int
	count              *kvbreaker.Breaker // counts failures (never opens)
	probe, probeClosed *kvbreaker.Breaker // threshold 1; the second FailClosed
}

type failoverFleet struct {
	t       *testing.T
	r       *redistest.Replicated
	clock   *uniqueClock
	prefix  string
	workers []*worker
	h       *history
}

const recoveryDelay = 10 * time.Minute

func countSettings(clk *uniqueClock) kvbreaker.Settings {
	return kvbreaker.Settings{FailureThreshold: 4000, FailureWindow: time.Hour, RecoveryDelay: recoveryDelay,
		CallTimeout: callTimeout, Clock: clk.Now, SkipClockCheck: true}
}

func probeSettings(clk *uniqueClock, failClosed bool) kvbreaker.Settings {
	return kvbreaker.Settings{FailureThreshold: 1, FailureWindow: time.Hour, RecoveryDelay: recoveryDelay,
		CallTimeout: callTimeout, Clock: clk.Now, SkipClockCheck: true, FailClosed: failClosed}
}

func newFailoverFleet(t *testing.T, r *redistest.Replicated, n int, opts ...redis.Option) *failoverFleet {
	f := &failoverFleet{t: t, r: r, clock: newUniqueClock(), prefix: uniquePrefix(t), h: &history{}}
	for i := range n {
		st, err := redis.New(failoverClient(t, r), opts...)
		if err != nil {
			t.Fatal(err)
		}
		w := &worker{id: i}
		w.count = f.breaker(st, "c/", countSettings(f.clock))
		w.probe = f.breaker(st, "p/", probeSettings(f.clock, false))
		w.probeClosed = f.breaker(st, "p/", probeSettings(f.clock, true))
		f.workers = append(f.workers, w)
	}
	return f
}

func (f *failoverFleet) breaker(st *redis.Store, sub string, s kvbreaker.Settings) *kvbreaker.Breaker {
	p, err := kvbreaker.Prefixed(st, f.prefix+sub)
	if err != nil {
		f.t.Fatal(err)
	}
	b, err := kvbreaker.New(p, s)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// do runs one recorded call.
func (f *failoverFleet) do(w *worker, b *kvbreaker.Breaker, op, host string) call {
	ctx := f.t.Context()
	c := call{Worker: w.id, Op: op, Host: host, Start: time.Now()}
	switch op {
	case "allow":
		var v kvbreaker.Verdict
		v, c.Err = b.Allow(ctx, host, time.Time{})
		c.Decision = v.Decision
	case "failure":
		c.Err = b.Failure(ctx, host)
	case "success":
		c.Err = b.Success(ctx, host)
	}
	c.End = time.Now()
	f.h.add(c)
	return c
}

// inspect reads the hosts' records on the server at addr directly (not
// through Sentinel): the failures stored and the open circuits.
func (f *failoverFleet) inspect(addr, sub string, s kvbreaker.Settings, hosts []string) (failures, open int) {
	st, err := redis.New(newClient(f.t, addr))
	if err != nil {
		f.t.Fatal(err)
	}
	b := f.breaker(st, sub, s)
	for _, h := range hosts {
		stt, err := b.Inspect(f.t.Context(), h)
		if err != nil {
			f.t.Fatalf("inspect %s on %s: %v", h, addr, err)
		}
		failures += len(stt.Failures)
		if stt.State == kvbreaker.StateOpen {
			open++
		}
	}
	return failures, open
}

// replicate waits until every write the primary at addr applied so far
// has reached n replicas (a marker written and WAITed for).
func replicate(t *testing.T, addr string, n int) {
	c := newClient(t, addr)
	ctx := t.Context()
	if err := c.Set(ctx, "kvbreaker-test-marker", time.Now().String(), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Do(ctx, "wait", n, 10000).Int(); err != nil || got < n {
		t.Fatalf("WAIT %d on %s = %d, %v", n, addr, got, err)
	}
}

// lossFigures is what one lagging-replica failover cost the fleet.
type lossFigures struct {
	Mode                     string
	Failures, Acked, Refused int // Failure calls; acknowledged; returned an error
	StoredBefore, Survived   int // failures in the records on the old primary before the kill, on the new one after
	OpenBefore, OpenAfter    int // probe circuits open on the old primary (all), on the new one
	Probes, SecondProbes     int // Probe answers in the one restraint; violations of one probe per restraint
	FailOpenSends            int // Send answers with a store error in the restraint (fail-open deliveries)
	Failover                 time.Duration
	// With min-replicas-to-write: how long the primary acknowledged
	// writes after the replica stopped, and how many.
	Window       time.Duration
	StalledAcked int
}

func (l lossFigures) String() string {
	s := fmt.Sprintf("%-12s failures %3d acked %3d refused %3d | stored on old primary %3d, survived %d, acked lost %3d | probes %d, second probes %d, fail-open sends %d | failover %v",
		l.Mode, l.Failures, l.Acked, l.Refused, l.StoredBefore, l.Survived, l.Acked-l.Survived, l.Probes, l.SecondProbes, l.FailOpenSends, l.Failover.Round(100*time.Millisecond))
	if l.Window > 0 {
		s += fmt.Sprintf(" | replica stalled: %d writes acknowledged for %v", l.StalledAcked, l.Window.Round(100*time.Millisecond))
	}
	return s
}

// laggingReplicaFailover runs the failover that loses acknowledged writes
// on every run, not by chance: the replica is paused (its replication
// stalls, as a slow or partitioned replica's does), the fleet records
// failures and elects probes on the primary, the primary is killed and the
// replica resumed, and Sentinel promotes it. Then it counts what survived
// on the new primary, elects again in the same restraint, and brings the
// old primary back as a replica.
func laggingReplicaFailover(t *testing.T, mode string, serverMinReplicas bool, opts ...redis.Option) lossFigures {
	r := replicated(t)
	ctx := t.Context()
	// The primary and its replica in sync, as the set-up of the failover
	// this test causes: a failover Sentinel made on its own before it (a
	// loaded machine can delay a PING past down-after-milliseconds) only
	// changes which server is the primary, so the set-up asks again.
	var primary *redistest.Server
	var err error
	for attempt := 1; ; attempt++ {
		if primary, err = r.Primary(ctx); err != nil {
			t.Fatal(err)
		}
		if err = r.WaitSynced(ctx, primary); err == nil {
			break
		}
		if attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("set-up, attempt %d: %v", attempt, err)
	}
	var replica *redistest.Server
	for _, s := range r.Servers {
		if s != primary {
			replica = s
		}
	}
	minReplicas := "0"
	if serverMinReplicas {
		minReplicas = "1"
	}
	for _, s := range r.Servers {
		c := newClient(t, s.Addr())
		if err := c.ConfigSet(ctx, "min-replicas-to-write", minReplicas).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.ConfigSet(ctx, "min-replicas-max-lag", "1").Err(); err != nil {
			t.Fatal(err)
		}
	}
	f := newFleet4(t, r, opts...)
	probeHosts := []string{"open.example", "closed.example"} // probe and probeClosed Breakers
	w0 := f.workers[0]
	for i, b := range []*kvbreaker.Breaker{w0.probe, w0.probeClosed} {
		// With WithWaitReplicas a loaded machine can keep the in-sync
		// replica's acknowledgement past its timeout: the write was applied
		// on the primary, and replicate below waits until the replica has
		// it, which is the state this set-up needs.
		if c := f.do(w0, b, "failure", probeHosts[i]); c.Err != nil && !errors.Is(c.Err, redis.ErrNotReplicated) {
			t.Fatal(c)
		}
	}
	replicate(t, primary.Addr(), 1)
	openBefore := 0
	for i, s := range []kvbreaker.Settings{probeSettings(f.clock, false), probeSettings(f.clock, true)} {
		_, o := f.inspect(primary.Addr(), "p/", s, probeHosts[i:i+1])
		openBefore += o
	}

	var countHosts []string
	for i := range 6 {
		countHosts = append(countHosts, fmt.Sprintf("c%d.example", i))
	}
	// The replica stops. While it is connected and silent the primary
	// counts it as a good replica for min-replicas-max-lag (1 s): measure
	// how long it keeps acknowledging writes then (they reach the paused
	// replica's socket buffer here, so they survive; across a partition
	// they would not).
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	var l lossFigures
	if serverMinReplicas {
		l.Window, l.StalledAcked = stalledWindow(t, f, countHosts)
	}
	// Its link is cut (it cannot reconnect while paused): from here every
	// write lives on the primary alone, the window a slow or partitioned
	// replica leaves in every asynchronous failover, made certain.
	if err := newClient(t, primary.Addr()).ClientKillByFilter(ctx, "TYPE", "replica").Err(); err != nil {
		t.Fatal(err)
	}
	f.h = &history{}
	var wg sync.WaitGroup
	for _, w := range f.workers {
		wg.Go(func() {
			for i := range 20 {
				f.do(w, w.count, "failure", countHosts[(w.id+i)%len(countHosts)])
			}
		})
	}
	wg.Wait()
	// The restraint ends; worker 0 is elected on the primary alone.
	f.clock.Set(time.Now().Add(recoveryDelay + time.Minute))
	f.do(w0, w0.probe, "allow", probeHosts[0])
	f.do(w0, w0.probeClosed, "allow", probeHosts[1])
	storedBefore, _ := f.inspect(primary.Addr(), "c/", countSettings(f.clock), countHosts)

	killed := time.Now()
	primary.Kill()
	if err := replica.Resume(); err != nil {
		t.Fatal(err)
	}
	np, err := r.WaitFailover(ctx, primary.Addr())
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(killed)
	if np != replica {
		t.Fatalf("new primary %s, want the replica %s", np.Addr(), replica.Addr())
	}
	// The other workers elect in the same restraint, on the new primary;
	// each retries until its client has found it.
	for _, w := range f.workers[1:] {
		for i, b := range []*kvbreaker.Breaker{w.probe, w.probeClosed} {
			for until := time.Now().Add(10 * time.Second); ; {
				// Retry only until the client reaches the new primary; a
				// write it refuses (NOREPLICAS) or does not replicate is an
				// answer.
				c := f.do(w, b, "allow", probeHosts[i])
				if c.Err == nil || errors.Is(c.Err, redis.ErrNotReplicated) || strings.Contains(c.Err.Error(), "NOREPLICAS") || time.Now().After(until) {
					break
				}
			}
		}
	}
	survived, _ := f.inspect(np.Addr(), "c/", countSettings(f.clock), countHosts)
	openAfter := 0
	for i, s := range []kvbreaker.Settings{probeSettings(f.clock, false), probeSettings(f.clock, true)} {
		_, o := f.inspect(np.Addr(), "p/", s, probeHosts[i:i+1])
		openAfter += o
	}

	if err := primary.RestartAsReplica(ctx, np.Addr()); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitSynced(ctx, np); err != nil {
		t.Fatal(err)
	}

	calls := f.h.all()
	l.Mode, l.StoredBefore, l.Survived, l.OpenBefore, l.OpenAfter, l.Failover = mode, storedBefore, survived, openBefore, openAfter, took
	for _, c := range calls {
		switch {
		case c.Op == "failure" && c.Host != probeHosts[0] && c.Host != probeHosts[1]:
			l.Failures++
			if c.Err == nil {
				l.Acked++
			} else {
				l.Refused++
			}
		case c.Op == "allow" && c.Err == nil && c.Decision == kvbreaker.Probe:
			l.Probes++
		case c.Op == "allow" && c.Err != nil && c.Decision == kvbreaker.Send:
			l.FailOpenSends++
		}
	}
	l.SecondProbes = len(checkOneProbe(calls))
	for _, v := range checkCallTime(calls, callTimeout+callSlack) {
		t.Error(v)
	}
	if t.Failed() || testing.Verbose() {
		for _, c := range calls {
			if c.Op == "allow" {
				t.Log(c)
			}
		}
	}
	t.Log(l)
	return l
}

// stalledWindow makes failures on the primary, whose replica is paused,
// until the primary refuses one (min-replicas-to-write) or 15 s pass, and
// returns how long that took and how many it acknowledged.
func stalledWindow(t *testing.T, f *failoverFleet, hosts []string) (time.Duration, int) {
	start := time.Now()
	w := f.workers[0]
	acked := 0
	for time.Since(start) < 15*time.Second {
		c := f.do(w, w.count, "failure", "s."+hosts[acked%len(hosts)])
		if c.Err != nil {
			if !strings.Contains(c.Err.Error(), "NOREPLICAS") {
				t.Fatalf("stalled replica: %v, want NOREPLICAS", c)
			}
			return c.Start.Sub(start), acked
		}
		acked++
		time.Sleep(10 * time.Millisecond) // a steady write rate, not a wait for logic
	}
	t.Fatal("the primary still acknowledged writes 15 s after its replica stopped, with min-replicas-to-write 1 and min-replicas-max-lag 1")
	return 0, 0
}

// waitCost logs the median time of a compare-and-swap on the primary
// with and without WithWaitReplicas(1, …), its replica in sync: the price
// of the option on this machine (measured, not asserted).
func waitCost(t *testing.T) {
	r := replicated(t)
	ctx := t.Context()
	primary, err := r.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WaitSynced(ctx, primary); err != nil {
		t.Fatal(err)
	}
	prefix := uniquePrefix(t)
	median := func(opts ...redis.Option) time.Duration {
		st, err := redis.New(failoverClient(t, r), opts...)
		if err != nil {
			t.Fatal(err)
		}
		var ds []time.Duration
		for i := range 200 {
			key := fmt.Sprintf("%s%d/%d", prefix, len(opts), i)
			start := time.Now()
			if _, err := st.CompareAndSwap(ctx, key, 0, []byte("x"), time.Minute); err != nil {
				t.Fatal(err)
			}
			ds = append(ds, time.Since(start))
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	async, wait := median(), median(redis.WithWaitReplicas(1, time.Second))
	t.Logf("compare-and-swap, median of 200: %v asynchronous, %v with WithWaitReplicas(1, 1s)", async.Round(time.Microsecond), wait.Round(time.Microsecond))
}

// newFleet4 is the four workers of a failover run.
func newFleet4(t *testing.T, r *redistest.Replicated, opts ...redis.Option) *failoverFleet {
	return newFailoverFleet(t, r, 4, opts...)
}

// TestSentinelFailover measures what a Sentinel failover costs a Breaker
// fleet when replication lags (the replica paused), with Redis's default
// asynchronous replication, with min-replicas-to-write 1 on the servers,
// and with the adapter's WithWaitReplicas(1, …); then, in the longer run
// (-failover.rounds), fails over under load (the primary killed, the
// primary paused) and checks the fleet finds the new primary within a
// bounded time.
func TestSentinelFailover(t *testing.T) {
	t.Run("lagging-replica/async", func(t *testing.T) {
		l := laggingReplicaFailover(t, "async", false)
		// Every acknowledged failure lived on the primary alone: all lost.
		if l.Acked == 0 || l.Survived != 0 || l.StoredBefore < l.Acked {
			t.Errorf("%v: want every acknowledged failure stored on the old primary and none surviving", l)
		}
		// Both probe claims were lost: a second probe on each host.
		if l.SecondProbes != 2 {
			t.Errorf("%v: want each lost claim to let a second worker probe", l)
		}
	})
	t.Run("lagging-replica/min-replicas-to-write", func(t *testing.T) {
		if *failoverRounds == 0 {
			t.Skip("a longer run: -failover.rounds=N")
		}
		l := laggingReplicaFailover(t, "min-replicas", true)
		// With the replica's link cut the primary refuses every write;
		// while it was connected but stalled it acknowledged writes for up
		// to min-replicas-max-lag plus the replica's 1 s acknowledgement
		// period.
		if l.Acked != 0 || l.Refused != l.Failures || l.SecondProbes != 0 || l.Window == 0 {
			t.Errorf("%v: want every write refused once the replica is gone, and one probe", l)
		}
	})
	t.Run("lagging-replica/WithWaitReplicas", func(t *testing.T) {
		l := laggingReplicaFailover(t, "wait", false, redis.WithWaitReplicas(1, 100*time.Millisecond))
		// No write is acknowledged that the replica did not have: none is
		// lost, and the probe claim that was not replicated is reported.
		if l.Acked != 0 || l.Refused != l.Failures || l.SecondProbes != 0 || l.Survived != 0 {
			t.Errorf("%v: want no acknowledged write and one probe", l)
		}
	})

	t.Run("wait-cost", func(t *testing.T) { waitCost(t) })

	seed := *failoverSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	// The default run's failover under load is TestRobustness/sentinel's
	// (the harness's fleet, faults and checks); these rounds are the
	// longer run's, with their own figures.
	var faults []string
	if *failoverRounds > 0 {
		rng := rand.New(rand.NewPCG(seed, 0))
		for range *failoverRounds {
			faults = append(faults, []string{"kill", "pause"}[rng.IntN(2)])
		}
		t.Logf("failover schedule, seed %d (-failover.seed=%d replays it): %v", seed, seed, faults)
	}
	for i, fault := range faults {
		t.Run(fmt.Sprintf("under-load/%d-%s", i, fault), func(t *testing.T) { failoverUnderLoad(t, fault) })
	}
}

// failoverUnderLoad keeps four workers recording failures while the
// primary is killed or paused and Sentinel promotes the replica; then the
// old primary comes back as a replica (a killed one restarted with
// --replicaof, a paused one resumed and demoted by Sentinel). It checks
// every call ends within CallTimeout plus slack and every worker makes a
// successful call within a bounded time of the new primary being named,
// and reports the acknowledged failures the failover lost (replication
// lag on this machine is the window; the figure is measured, not
// asserted).
func failoverUnderLoad(t *testing.T, fault string) {
	r := replicated(t)
	ctx := t.Context()
	primary, err := r.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WaitSynced(ctx, primary); err != nil {
		t.Fatal(err)
	}
	f := newFleet4(t, r)
	var hosts []string
	for i := range 6 {
		hosts = append(hosts, fmt.Sprintf("l%d.example", i))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range f.workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				f.do(w, w.count, "failure", hosts[(w.id+i)%len(hosts)])
			}
		})
	}
	// Let the load run on the healthy primary before the fault.
	waitCalls(t, f.h, 50)
	faultAt := time.Now()
	switch fault {
	case "kill":
		primary.Kill()
	case "pause":
		if err := primary.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	np, err := r.WaitFailover(ctx, primary.Addr())
	if err != nil {
		t.Fatal(err)
	}
	named := time.Now()
	// Every worker must succeed on the new primary within a bound.
	recovered := waitEachWorkerOK(t, f, named, 10*time.Second)
	close(stop)
	wg.Wait()

	switch fault {
	case "kill":
		if err := primary.RestartAsReplica(ctx, np.Addr()); err != nil {
			t.Fatal(err)
		}
	case "pause":
		// Resumed, it still says it is the primary until Sentinel demotes
		// it; clients that ask Sentinel no longer write to it.
		if err := primary.Resume(); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.WaitSynced(ctx, np); err != nil {
		t.Fatal(err)
	}
	calls := f.h.all()
	acked := 0
	for _, c := range calls {
		if c.Op == "failure" && c.Err == nil {
			acked++
		}
	}
	survived, _ := f.inspect(np.Addr(), "c/", countSettings(f.clock), hosts)
	errs := 0
	for _, c := range calls {
		if c.Err != nil {
			errs++
		}
	}
	for _, v := range checkCallTime(calls, callTimeout+callSlack) {
		t.Error(v)
	}
	// A Failure that returned an error may have been applied (its answer
	// lost), so acked−survived is a lower bound of the acknowledged
	// failures lost.
	t.Logf("%s: %d calls, %d errors, %d acked failures, %d survived (at least %d acknowledged lost); new primary named %v after the fault, every worker served %v after that",
		fault, len(calls), errs, acked, survived, max(0, acked-survived), named.Sub(faultAt).Round(100*time.Millisecond), recovered.Round(time.Millisecond))
	if failures := countOp(calls, "failure"); survived > failures {
		t.Errorf("%d failures stored, more than the %d Failure calls", survived, failures)
	}
}

func countOp(calls []call, op string) int {
	n := 0
	for _, c := range calls {
		if c.Op == op {
			n++
		}
	}
	return n
}

// waitCalls waits until h holds n calls (real servers answering).
func waitCalls(t *testing.T, h *history, n int) {
	for until := time.Now().Add(10 * time.Second); time.Now().Before(until); {
		h.mu.Lock()
		got := len(h.calls)
		h.mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(10 * time.Millisecond) // waiting for a real server's answers
	}
	t.Fatalf("fewer than %d calls in 10 s", n)
}

// waitEachWorkerOK waits until every worker has a call that started after
// since and succeeded, failing t after limit; it returns how long after
// since the last worker got there.
func waitEachWorkerOK(t *testing.T, f *failoverFleet, since time.Time, limit time.Duration) time.Duration {
	for {
		ok := map[int]time.Time{}
		for _, c := range f.h.all() {
			if c.Start.After(since) && c.Err == nil {
				if _, seen := ok[c.Worker]; !seen {
					ok[c.Worker] = c.End
				}
			}
		}
		if len(ok) == len(f.workers) {
			var last time.Time
			for _, at := range ok {
				if at.After(last) {
					last = at
				}
			}
			return last.Sub(since)
		}
		if time.Since(since) > limit {
			var errs []string
			for _, c := range f.h.all() {
				if c.Start.After(since) && c.Err != nil {
					errs = append(errs, c.String())
				}
			}
			t.Fatalf("the Breaker recovers within %v of the new primary: workers served %d of %d; errors since: %s", limit, len(ok), len(f.workers), strings.Join(lastN(errs, 8), "\n"))
		}
		time.Sleep(20 * time.Millisecond) // waiting for real servers
	}
}

func lastN(s []string, n int) []string { return s[max(0, len(s)-n):] }

// TestHistoryChecksFlag: the checks flag what they exist for (a second
// Probe with no outcome between, a call past the limit) and pass a history
// without them.
func TestHistoryChecksFlag(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	good := []call{
		{Worker: 0, Op: "allow", Host: "a", Start: at(0), End: at(5), Decision: kvbreaker.Probe},
		{Worker: 1, Op: "allow", Host: "a", Start: at(1), End: at(6), Decision: kvbreaker.Hold},
		{Worker: 0, Op: "failure", Host: "a", Start: at(7), End: at(9)},
		{Worker: 1, Op: "allow", Host: "a", Start: at(10), End: at(12), Decision: kvbreaker.Probe},
		{Worker: 2, Op: "allow", Host: "b", Start: at(10), End: at(12), Decision: kvbreaker.Probe},
		{Worker: 2, Op: "allow", Host: "b", Start: at(13), End: at(15), Decision: kvbreaker.Send, Err: errors.New("store down")},
	}
	if v := checkOneProbe(good); v != nil {
		t.Errorf("checkOneProbe on a good history: %v", v)
	}
	if v := checkCallTime(good, 10*time.Millisecond); v != nil {
		t.Errorf("checkCallTime on a good history: %v", v)
	}
	bad := append(good, call{Worker: 3, Op: "allow", Host: "a", Start: at(20), End: at(40), Decision: kvbreaker.Probe})
	if v := checkOneProbe(bad); len(v) != 1 || !strings.Contains(v[0], "at most one probe per restraint") {
		t.Errorf("checkOneProbe on a second probe: %v", v)
	}
	if v := checkCallTime(bad, 10*time.Millisecond); len(v) != 1 || !strings.Contains(v[0], "no call longer than") {
		t.Errorf("checkCallTime on a 20 ms call: %v", v)
	}
}
