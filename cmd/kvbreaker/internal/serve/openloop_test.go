package serve

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/trace"
	"slices"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The closed-loop benchmarks keep every caller waiting on an answer, so
// they measure the most serve can answer, not the latency a fleet sees:
// a delivery worker asks once per delivery, and a delivery (a POST to a
// remote inbox) takes tens to hundreds of milliseconds, so 64 workers
// offer a bounded rate. The open-loop benchmark offers that rate.

// openClients is the 64 concurrent clients: 64 workers, each
// with at most one decision in flight.
const openClients = 64

// openRates are the decisions a second each client asks for.
var openRates = []float64{10, 50, 100, 200, 400}

// BenchmarkDecideOpenLoop: 64 clients each ask for decisions at a fixed
// mean rate, arrivals a Poisson process per client (exponential gaps
// from a seeded generator), through serve over loopback in this process
// (target=serve), through serve in a child process (target=child: the
// clients' runtime and the server's apart, as a fleet's workers and
// serve are), and by Breaker.Allow in the same process (target=allow,
// which measures the harness itself: its wake-up delay and the
// scheduling of 64 goroutines on the machine's CPUs). lean and leanproc
// are serve and child asked by leanClient, a synchronous client as
// workers in other languages have, instead of net/http's; leanmin is
// leanproc with the child's connections served by minimalServe, an
// experiment without net/http's Server, not serve as it runs. wait= is how a
// client waits for its next arrival (waiters): timerfd is the one to
// measure with; nanosleep and sleep show what the others cost. A client
// whose previous decision is still in flight at its next arrival sends
// when that one is answered, and every latency runs from the scheduled
// arrival, so a slow answer counts against every arrival it delays
// rather than hiding them (no coordinated omission). b.N is the number
// of decisions over all clients; p50, p99 and p99.9 are over every one
// of them, and decisions/s is the rate achieved, against the offered
// 64 × rate. cpu-µs/op is this process's CPU time (user and system) per
// decision during the schedule, and for the child server-cpu-µs/op the
// child's. wake-p99 is how late the waits returned (the harness's own
// delay, in every latency); for serve, handler-p99 is the time in the
// server's handler (reading the body, deciding, writing the answer),
// dials the connections the server accepted during the schedule, and
// for the child server-allocs/op and server-B/op its heap allocations
// per request (runtime.MemStats).
func BenchmarkDecideOpenLoop(b *testing.B) {
	for _, target := range []string{"allow", "serve", "child", "lean", "leanproc", "leanmin"} {
		for _, w := range waiters {
			for _, rate := range openRates {
				b.Run(fmt.Sprintf("target=%s/wait=%s/rate=%g", target, w.name, rate), func(b *testing.B) {
					var one func(int) error
					var lb *loopback
					switch target {
					case "serve":
						lb = startLoopback(b, openClients)
						one = lb.decide
					case "child":
						lb = startChild(b, openClients)
						one = lb.decide
					case "lean":
						lb = startLoopback(b, openClients)
						one = newLeanClient(b, lb, openClients).decide
					case "leanproc":
						lb = startChild(b, openClients)
						one = newLeanClient(b, lb, openClients).decide
					case "leanmin":
						lb = startChild(b, openClients, childLoopEnv+"=minimal")
						one = newLeanClient(b, lb, openClients).decide
					default:
						br := benchBreaker(b)
						one = func(i int) error {
							_, err := br.Allow(context.Background(), benchHosts[i%len(benchHosts)], time.Time{})
							return err
						}
					}
					runOpenLoop(b, rate, w.new, one, lb)
				})
			}
		}
	}
}

// openResult is what one open-loop run measured.
type openResult struct {
	lat   []time.Duration // from each scheduled arrival to its answer
	late  []time.Duration // how late a wait returned, when it waited
	start time.Time       // the schedule's start
	last  time.Time       // the last scheduled arrival
	end   time.Time       // the last answer
}

// openLoop sends per decisions from each of clients goroutines at a mean
// rate a second each, Poisson arrivals, and measures each from its
// scheduled arrival, which wait waits for. Every client first calls one
// once, unmeasured and all at once, so connections are open before the
// schedule starts; warmed runs then.
func openLoop(ctx context.Context, clients, per int, rate float64, newWait func() (func(time.Time), func()), one func(i int) error, warmed func()) (openResult, error) {
	// The warm-up's calls are all in flight at once, so that each client
	// has a connection of its own before the schedule starts, as a
	// fleet's workers do, rather than dialling within it.
	warm := make([]error, clients)
	var ready sync.WaitGroup
	for c := range clients {
		ready.Go(func() { warm[c] = one(c) })
	}
	ready.Wait()
	if err := errors.Join(warm...); err != nil {
		return openResult{}, fmt.Errorf("warm-up: %w", err)
	}
	warmed()
	var (
		mu     sync.Mutex
		res    openResult
		failed error
		wg     sync.WaitGroup
	)
	res.lat = make([]time.Duration, 0, clients*per)
	mean := float64(time.Second) / rate
	// A little ahead, so that no client's first arrival is already late
	// when its goroutine starts.
	res.start = time.Now().Add(10 * time.Millisecond)
	for c := range clients {
		wait, stop := newWait()
		wg.Go(func() {
			defer stop()
			r := rand.New(rand.NewPCG(uint64(c), 40))
			lat := make([]time.Duration, 0, per)
			late := make([]time.Duration, 0, per)
			next := res.start
			for i := range per {
				if ctx.Err() != nil {
					break
				}
				next = next.Add(time.Duration(r.ExpFloat64() * mean))
				if time.Until(next) > 0 {
					wait(next)
					late = append(late, time.Since(next))
				}
				// A region in a runtime trace (-test.trace) for each
				// call, so a trace's decisions can be told apart.
				region := trace.StartRegion(ctx, "decision")
				err := one(c*per + i)
				region.End()
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				}
				lat = append(lat, time.Since(next))
			}
			mu.Lock()
			res.lat = append(res.lat, lat...)
			res.late = append(res.late, late...)
			if next.After(res.last) {
				res.last = next
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	res.end = time.Now()
	if failed != nil {
		return res, failed
	}
	slices.Sort(res.lat)
	slices.Sort(res.late)
	return res, nil
}

// quantile is the q-quantile of sorted (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// runOpenLoop runs the open loop with b.N decisions and reports them;
// lb, when the target is serve, adds what the server counted.
func runOpenLoop(b *testing.B, rate float64, newWait func() (func(time.Time), func()), one func(i int) error, lb *loopback) {
	per := max((b.N+openClients-1)/openClients, 1)
	µs := func(d time.Duration) float64 { return float64(d) / 1e3 }
	var before serverStats
	var cpu time.Duration
	warm := func() {
		if lb != nil {
			before = lb.stats(b, true)
		}
		cpu = processCPU()
	}
	b.ReportAllocs()
	b.ResetTimer()
	res, err := openLoop(b.Context(), openClients, per, rate, newWait, one, warm)
	b.StopTimer()
	cpu = processCPU() - cpu
	if err != nil {
		b.Fatal(err)
	}
	if n := len(res.lat); n > 0 && cpu > 0 {
		b.ReportMetric(µs(cpu)/float64(n), "cpu-µs/op")
	}
	if lb != nil {
		after := lb.stats(b, false)
		n := float64(after.Requests)
		b.ReportMetric(µs(time.Duration(after.P99)), "handler-p99-µs")
		b.ReportMetric(µs(time.Duration(after.P999)), "handler-p99.9-µs")
		b.ReportMetric(float64(after.Accepted-before.Accepted), "dials")
		if lb.child && n > 0 {
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "server-allocs/op")
			b.ReportMetric(float64(after.Bytes-before.Bytes)/n, "server-B/op")
			b.ReportMetric(µs(time.Duration(after.CPU-before.CPU))/n, "server-cpu-µs/op")
		}
	}
	b.ReportMetric(µs(quantile(res.late, 0.99)), "wake-p99-µs")
	b.ReportMetric(µs(quantile(res.lat, 0.50)), "p50-µs")
	b.ReportMetric(µs(quantile(res.lat, 0.99)), "p99-µs")
	b.ReportMetric(µs(quantile(res.lat, 0.999)), "p99.9-µs")
	// Both rates over the same decisions: offered is the schedule's (its
	// Poisson draws make it differ a little from 64 × rate), achieved
	// runs to the last answer.
	n := float64(len(res.lat))
	b.ReportMetric(n/res.last.Sub(res.start).Seconds(), "offered/s")
	b.ReportMetric(n/res.end.Sub(res.start).Seconds(), "decisions/s")
	b.ReportMetric(float64(len(res.lat))/float64(b.N), "calls/op")
}

// TestOpenLoopCountsQueueing: with an injected clock, a decision that
// takes no time has latency 0, and one that stalls delays the arrivals
// scheduled behind it on its client, each of which counts the wait from
// its own arrival (a harness timing from the send would see one slow
// decision).
func TestOpenLoopCountsQueueing(t *testing.T) {
	const clients, per, rate = 4, 50, 100.0
	const stall = 200 * time.Millisecond
	synctest.Test(t, func(t *testing.T) {
		res, err := openLoop(t.Context(), clients, per, rate, sleepWait, func(int) error { return nil }, func() {})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.lat) != clients*per || res.lat[len(res.lat)-1] != 0 {
			t.Fatalf("%d decisions, the slowest %v: want %d, all 0 (no time passes in a call)", len(res.lat), res.lat[len(res.lat)-1], clients*per)
		}
		res, err = openLoop(t.Context(), clients, per, rate, sleepWait, func(i int) error {
			if i == per/2+clients { // client 0's, after the warm-up's i < clients
				time.Sleep(stall)
			}
			return nil
		}, func() {})
		if err != nil {
			t.Fatal(err)
		}
		slow := len(res.lat) - sort.Search(len(res.lat), func(i int) bool { return res.lat[i] >= stall/4 })
		// At 100 a second, about 20 arrivals fall in a 200 ms stall; at
		// least the first several of them wait a quarter of it or more.
		if res.lat[len(res.lat)-1] < stall || slow < 5 {
			t.Fatalf("the slowest %v, %d at ≥ %v: want ≥ %v and ≥ 5 (the stall counted from each arrival it delays)", res.lat[len(res.lat)-1], slow, stall/4, stall)
		}
	})
}

// waiter is a way for an open-loop client to wait for its next arrival:
// new makes one client's wait and what releases it.
type waiter struct {
	name string
	new  func() (wait func(time.Time), stop func())
}

// sleepWait waits with the runtime's timers, which an idle process's
// poller wakes on whole milliseconds.
func sleepWait() (func(time.Time), func()) {
	return func(t time.Time) { time.Sleep(time.Until(t)) }, func() {}
}
