package cloudflarekv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cloudflare/cloudflare-go/v6/kv"
	"github.com/cloudflare/cloudflare-go/v6/option"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/internal/sim"
	"github.com/kvbreaker/kvbreaker/internal/testservers/miniflare"
)

// BudgetRateEnv turns TestBudgetRate on: "1" scans the default arrival
// rates, or a comma-separated list of arrivals per host per hour.
const BudgetRateEnv = "KVBREAKER_BUDGET_RATE"

// budgetRateDuration is the simulated traffic replayed per rate: twelve
// 5-minute budget windows.
const budgetRateDuration = time.Hour

// defaultBudgetRates are arrivals per host per hour (the default workload
// has 30) over the default 1,000 hosts.
var defaultBudgetRates = []float64{8, 8.5, 9, 10, 13, 16, 30}

// TestBudgetRate finds the largest delivery rate a fleet of the simulator's
// default shape (1,000 hosts in the default mix, 64 workers in 8
// processes, seed 1) sustains within Workers KV's 1,200 requests per
// 5 minutes. For each arrival rate, the simulator's call stream (every
// decision and outcome, in the process that makes it) is replayed through
// 8 real kvbreaker.Breakers over 8 real Stores (WithRequestBudget(8), default
// read cache) against a Miniflare of its own, on synctest's fake clock: the
// stores' cache freshness, write intervals and buckets and the Breakers'
// clock all run on simulated time, while each HTTP request is made outside
// the bubble, so simulated time stands still while it is in flight.
// Requests are counted by Miniflare's own counter (sampled every simulated
// minute) and must equal the requests the stores' transports logged, which
// give the exact sliding 5-minute windows. A rate is sustained when no
// bucket ever refused a request (a take that sent nothing). Opt-in (it takes
// minutes): KVBREAKER_BUDGET_RATE=1 go test -count=1 -timeout 20m -run TestBudgetRate -v ./backends/cloudflarekv/
func TestBudgetRate(t *testing.T) {
	env := os.Getenv(BudgetRateEnv)
	if env == "" {
		t.Skipf("opt-in: %s=1 (or a list of arrivals per host per hour, e.g. 4,6) runs it", BudgetRateEnv)
	}
	rates := defaultBudgetRates
	if env != "1" {
		rates = nil
		for f := range strings.SplitSeq(env, ",") {
			r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || !(r > 0) {
				t.Fatalf("%s=%q: want 1 or a list of positive arrival rates", BudgetRateEnv, env)
			}
			rates = append(rates, r)
		}
	}
	mf := miniflare.MustStart(t)
	x := newOutside(t)
	var rows []string
	for _, rate := range rates {
		r := runBudgetRate(t, mf, x, rate)
		rows = append(rows, r.String())
		t.Logf("%s", r)
	}
	t.Logf("arrivals/host/h  deliveries/s  requests  req/delivery  max-5min(log)  max-5min(miniflare)  refused  allow-errors/allows  outcome-errors  same-key-writes<1s\n%s", strings.Join(rows, "\n"))
}

// rateResult is one rate's measurement.
type rateResult struct {
	rate                float64
	deliveries, calls   int
	requests            int // Miniflare's count
	maxWindow           int // exact sliding 5-minute window, from the log
	maxMinuteWindow     int // 5 consecutive simulated minutes, Miniflare's count
	refused             int // bucket takes that sent nothing
	allows              int
	allowErrs           int // Allow answered per FailClosed (ErrBudgetExhausted)
	outcomeErrs         int // Failure/Success: a write left queued past CallTimeout, or a refused read
	otherErrs           int
	fastRewrites        int // same key written twice within 1 s (a 429 on Cloudflare)
	gets, puts, deletes int
}

func (r rateResult) String() string {
	secs := budgetRateDuration.Seconds()
	return fmt.Sprintf("%15g  %12.2f  %8d  %12.3f  %13d  %19d  %7d  %6d/%-7d  %16d  %18d", r.rate, float64(r.deliveries)/secs, r.requests,
		float64(r.requests)/float64(r.deliveries), r.maxWindow, r.maxMinuteWindow, r.refused, r.allowErrs, r.allows, r.outcomeErrs, r.fastRewrites)
}

type procCall struct {
	proc int
	sim.Call
}

func runBudgetRate(t *testing.T, mf *miniflare.Server, x *outside, rate float64) rateResult {
	t.Helper()
	const procs = 8
	var calls []procCall
	rep, err := sim.Run(sim.Scenario{Seed: 1, Duration: budgetRateDuration, Rate: rate, Processes: procs,
		OnCall: func(p int, c sim.Call) { calls = append(calls, procCall{p, c}) }})
	if err != nil {
		t.Fatal(err)
	}
	res := rateResult{rate: rate, deliveries: rep.Trace.Deliveries, calls: len(calls)}
	if err := x.run(func() error { return mf.ResetStats(context.Background()) }); err != nil {
		t.Fatal(err)
	}
	var log reqLog
	var minutes []miniflare.Stats // Miniflare's counts at each simulated minute
	prefix := fmt.Sprintf("rate%g:", rate)
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		start := time.Now()
		stores := make([]*tstore, procs)
		breakers := make([]*kvbreaker.Breaker, procs)
		takes := make([]atomic.Int64, procs)
		for p := range procs {
			tr := &procTransport{x: x, proc: p, log: &log}
			cl := kv.NewKVService(append([]option.RequestOption{option.WithBaseURL(mf.BaseURL()), option.WithAPIToken(mf.Token)}, option.WithHTTPClient(&http.Client{Transport: tr}))...)
			st, err := New(cl, mf.AccountID, mf.NamespaceID, WithRequestBudget(procs))
			if err != nil {
				t.Fatal(err)
			}
			s := prefixed(t, st, prefix)
			// Every take (a request the budget allows or refuses) reads
			// the bucket's clock once: count them.
			s.budget.now = func() time.Time { takes[p].Add(1); return time.Now() }
			stores[p] = s
			if breakers[p], err = kvbreaker.New(s, kvbreaker.Settings{Logger: quiet}); err != nil {
				t.Fatal(err)
			}
		}
		sample := func() {
			synctest.Wait() // writes in flight land first
			var st miniflare.Stats
			if err := x.run(func() (err error) { st, err = mf.Stats(context.Background()); return err }); err != nil {
				t.Fatal(err)
			}
			minutes = append(minutes, st)
		}
		sample()
		next := time.Minute
		var mu sync.Mutex
		keep := func(err error, allow bool) {
			if err == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case allow && errors.Is(err, ErrBudgetExhausted):
				res.allowErrs++
			case !allow && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrBudgetExhausted)):
				// core's CallTimeout ended the wait for a write the
				// budget keeps queued (it is still sent), or a
				// Success's read of the record was refused (nothing
				// deleted).
				res.outcomeErrs++
			default:
				if res.otherErrs == 0 {
					t.Errorf("unexpected error: %v", err)
				}
				res.otherErrs++
			}
		}
		for _, c := range calls {
			for c.At >= next {
				time.Sleep(time.Until(start.Add(next)))
				sample()
				next += time.Minute
			}
			time.Sleep(time.Until(start.Add(c.At)))
			b := breakers[c.proc]
			switch c.Kind {
			case sim.CallAllow:
				var held time.Time
				if c.HeldSince != 0 {
					held = start.Add(c.HeldSince)
				}
				_, err := b.Allow(ctx, c.Host, held)
				res.allows++
				keep(err, true)
			default:
				// An outcome may wait for a queued write (one per key per
				// second): the worker that reports it waits, the fleet
				// goes on. Wait until it has sent or queued its write, so
				// calls at one instant keep the simulator's order.
				go func() {
					if c.Kind == sim.CallFailure {
						keep(b.Failure(ctx, c.Host), false)
					} else {
						keep(b.Success(ctx, c.Host), false)
					}
				}()
				synctest.Wait()
			}
		}
		for next <= budgetRateDuration {
			time.Sleep(time.Until(start.Add(next)))
			sample()
			next += time.Minute
		}
		for _, s := range stores {
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		sample()
		for p := range procs {
			res.refused += int(takes[p].Load()) - log.sent(p)
		}
	})
	final := minutes[len(minutes)-1]
	res.gets, res.puts, res.deletes = final.Get, final.Put, final.Delete
	res.requests = final.Get + final.Put + final.Delete
	if n := len(log.entries); n != res.requests || final.Throttled+final.RateLimited != 0 {
		t.Errorf("rate %g: the stores sent %d requests, Miniflare counted %d (%+v)", rate, n, res.requests, final)
	}
	for i := range minutes {
		if j := i + 5; j < len(minutes) {
			total := func(s miniflare.Stats) int { return s.Get + s.Put + s.Delete }
			res.maxMinuteWindow = max(res.maxMinuteWindow, total(minutes[j])-total(minutes[i]))
		}
	}
	res.maxWindow, res.fastRewrites = log.windows(AccountPeriod)
	if res.maxWindow > AccountRequests {
		t.Errorf("rate %g: %d requests in one 5-minute window: over Workers KV's %d", rate, res.maxWindow, AccountRequests)
	}
	return res
}

// reqLog is every request the stores sent: simulated instant, process, method, path.
type reqLog struct {
	mu      sync.Mutex
	entries []reqEntry
}

type reqEntry struct {
	at     time.Time
	proc   int
	method string
	path   string
}

func (l *reqLog) add(e reqEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, e)
}

func (l *reqLog) sent(proc int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.entries {
		if e.proc == proc {
			n++
		}
	}
	return n
}

// windows returns the most requests in any window of length per, and how
// many writes (PUT, DELETE) followed another write of the same key, from
// any process, within a second: Cloudflare answers those 429.
func (l *reqLog) windows(per time.Duration) (most, fast int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	es := slices.Clone(l.entries)
	slices.SortStableFunc(es, func(a, b reqEntry) int { return a.at.Compare(b.at) })
	j := 0
	last := map[string]time.Time{}
	for i, e := range es {
		for e.at.Sub(es[j].at) >= per {
			j++
		}
		most = max(most, i-j+1)
		if e.method != http.MethodGet {
			if at, ok := last[e.path]; ok && e.at.Sub(at) < time.Second {
				fast++
			}
			last[e.path] = e.at
		}
	}
	return most, fast
}

// outside runs functions on goroutines started outside any synctest
// bubble: the real HTTP requests to Miniflare, whose connections' goroutines
// would otherwise join the bubble and, blocked on the network, keep its
// fake clock from ever advancing. A bubbled caller waiting for the answer on
// a channel made outside is not durably blocked, so simulated time stands
// still while a request is in flight.
type outside struct {
	jobs  chan outsideJob
	slots chan chan error // reply channels, all made outside
}

type outsideJob struct {
	fn    func() error
	reply chan error
}

func newOutside(t *testing.T) *outside {
	const workers = 16
	x := &outside{jobs: make(chan outsideJob), slots: make(chan chan error, 64)}
	for range cap(x.slots) {
		x.slots <- make(chan error, 1)
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := range x.jobs {
				j.reply <- j.fn()
			}
		})
	}
	t.Cleanup(func() {
		close(x.jobs)
		wg.Wait()
		http.DefaultClient.CloseIdleConnections()
		outsideClient.CloseIdleConnections()
	})
	return x
}

// run calls fn on an outside goroutine and returns its error.
func (x *outside) run(fn func() error) error {
	reply := <-x.slots
	x.jobs <- outsideJob{fn: fn, reply: reply}
	err := <-reply
	x.slots <- reply
	return err
}

// outsideClient makes the real requests, from outside goroutines only.
var outsideClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}

// procTransport is one process's HTTP transport: it logs each request
// (simulated instant, process) and sends it through outside. Bodies are
// read in full on the caller's side, so nothing made in the bubble is
// touched outside it.
type procTransport struct {
	x    *outside
	proc int
	log  *reqLog
}

func (p *procTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	p.log.add(reqEntry{at: time.Now(), proc: p.proc, method: req.Method, path: req.URL.Path})
	method, url, header := req.Method, req.URL.String(), req.Header.Clone()
	var status int
	var respHeader http.Header
	var respBody []byte
	err := p.x.run(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		out.Header = header
		resp, err := outsideClient.Do(out)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		status, respHeader = resp.StatusCode, resp.Header
		respBody, err = io.ReadAll(resp.Body)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: respHeader, Body: io.NopCloser(bytes.NewReader(respBody)), ContentLength: int64(len(respBody)),
		Request: req,
	}, nil
}
