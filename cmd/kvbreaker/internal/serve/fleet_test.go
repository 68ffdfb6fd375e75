package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/testservers/pgtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// event is one decision a worker printed.
type event struct {
	Worker   string     `json:"worker"`
	Message  int        `json:"message"`
	Decision string     `json:"decision"`
	RetryAt  *time.Time `json:"retry_at"`
	Error    *string    `json:"error"`
}

// transitions counts the circuit's transitions, from every Breaker of the
// fleet, with when each was stored.
type transitions struct {
	mu     sync.Mutex
	toOpen int
	opened time.Time
	closed time.Time
}

func (tr *transitions) hook(_ string, from, to kvbreaker.State) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	switch {
	case to == kvbreaker.StateOpen:
		tr.toOpen++
		tr.opened = time.Now()
	case from == kvbreaker.StateHalfOpen && to == kvbreaker.StateClosed:
		tr.closed = time.Now()
	}
}

// target is the receiving HTTP server: it holds every delivery until one
// from each of the fleet's workers has arrived (so that all are in flight
// when the circuit opens), fails them all (503) until half the recovery
// delay after the circuit opened, then accepts.
type target struct {
	mu       sync.Mutex
	workers  map[string]bool
	want     int
	all      chan struct{}
	arrivals []arrival
	// answered is when each worker was last answered: a worker decides
	// its next delivery after that, so a delivery whose worker was
	// answered after the opening was decided after it.
	answered map[string]time.Time
	// firstOK is when the first delivery was accepted: the probe's answer.
	firstOK  time.Time
	tr       *transitions
	recovery time.Duration
}

// arrival is one delivery: when it arrived, and when its worker had last
// been answered before it (zero for its first).
type arrival struct {
	at, prev time.Time
	ok       bool // accepted: the probe's, or one after the circuit closed
}

func (tg *target) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	worker, _, _ := strings.Cut(string(body), " ")
	tg.mu.Lock()
	i := len(tg.arrivals)
	tg.arrivals = append(tg.arrivals, arrival{at: time.Now(), prev: tg.answered[worker]})
	if !tg.workers[worker] {
		tg.workers[worker] = true
		if len(tg.workers) == tg.want {
			close(tg.all)
		}
	}
	tg.mu.Unlock()
	select {
	case <-tg.all:
	case <-r.Context().Done():
		return
	}
	tg.tr.mu.Lock()
	opened := tg.tr.opened
	tg.tr.mu.Unlock()
	if opened.IsZero() || time.Since(opened) < tg.recovery/2 {
		tg.answer(worker)
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	tg.mu.Lock()
	if tg.firstOK.IsZero() {
		tg.firstOK = time.Now()
	}
	tg.arrivals[i].ok = true
	tg.mu.Unlock()
	tg.answer(worker)
	w.WriteHeader(http.StatusOK)
}

func (tg *target) answer(worker string) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	tg.answered[worker] = time.Now()
}

// goWorker delivers count messages to url through b, as the examples do
// through serve, and returns its events.
func goWorker(ctx context.Context, b *kvbreaker.Breaker, url string, count int) ([]event, error) {
	host, err := kvbreaker.HostKey(url)
	if err != nil {
		return nil, err
	}
	var evs []event
	for m := range count {
		var held time.Time
		for {
			v, err := b.Allow(ctx, host, held)
			if err != nil {
				return evs, err
			}
			ev := event{Worker: "go", Message: m, Decision: v.Decision.String()}
			if v.Decision == kvbreaker.Hold {
				ev.RetryAt = &v.RetryAt
			}
			evs = append(evs, ev)
			if v.Decision == kvbreaker.Drop {
				break
			}
			if v.Decision == kvbreaker.Hold {
				held = v.HeldSince
				select {
				case <-time.After(time.Until(v.RetryAt)):
				case <-ctx.Done():
					return evs, ctx.Err()
				}
				continue
			}
			o := kvbreaker.Failure
			req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(fmt.Sprintf("go message %d", m)))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode < 300 {
					o = kvbreaker.Success
				}
			}
			if err := b.Record(ctx, host, o); err != nil {
				return evs, err
			}
			if o == kvbreaker.Success {
				break
			}
			held = time.Time{}
		}
	}
	return evs, nil
}

// runExample runs an example worker and returns its events.
func runExample(ctx context.Context, token string, name string, args ...string) ([]event, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "KVBREAKER_TOKEN="+token)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %v: %v\n%s", name, args, err, stderr.String())
	}
	var evs []event
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s: %q: %v", name, sc.Text(), err)
		}
		evs = append(evs, e)
	}
	return evs, nil
}

// fleetSettings are short enough for a test of seconds.
func fleetSettings(tr *transitions, recovery time.Duration) kvbreaker.Settings {
	return kvbreaker.Settings{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: recovery, ReleaseInterval: 100 * time.Millisecond,
		OnStateChange: tr.hook, SkipClockCheck: true}
}

// TestFleetOfLanguages: a Node worker and a Python worker (the examples in
// examples/serve, through serve) and a Go worker (the library in process)
// deliver to one host through one store: the circuit opens once
// fleet-wide, every worker holds until the same instant, exactly one
// probe goes out fleet-wide and is the only delivery while the circuit is
// restrained, and every message is delivered once it closes. Through
// Redis and through PostgreSQL.
func TestFleetOfLanguages(t *testing.T) {
	for _, tool := range []string{"node", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed (the examples run on it): %v", tool, err)
		}
	}
	examples, err := filepath.Abs("../../../../examples/serve")
	if err != nil {
		t.Fatal(err)
	}
	stores := map[string]func(t *testing.T) func() driver.Store{
		"redis": func(t *testing.T) func() driver.Store {
			srv := redistest.MustStart(t)
			return func() driver.Store {
				s, err := redis.Dial(t.Context(), srv.URL())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				return s
			}
		},
		"postgres": func(t *testing.T) func() driver.Store {
			srv := pgtest.MustStart(t)
			pool, err := pgxpool.New(t.Context(), srv.URL())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			if err := postgres.CreateTable(t.Context(), pool, "kvbreaker"); err != nil {
				t.Fatal(err)
			}
			return func() driver.Store {
				p, err := pgxpool.New(t.Context(), srv.URL())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(p.Close)
				s, err := postgres.New(p, "kvbreaker")
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
		},
	}
	for _, name := range []string{"redis", "postgres"} {
		t.Run(name, func(t *testing.T) {
			open := stores[name](t)
			const recovery = 2 * time.Second
			tr := &transitions{}
			prefixed := func() driver.Store {
				s, err := kvbreaker.Prefixed(open(), "fleet/")
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			served, err := kvbreaker.New(prefixed(), fleetSettings(tr, recovery))
			if err != nil {
				t.Fatal(err)
			}
			inproc, err := kvbreaker.New(prefixed(), fleetSettings(tr, recovery))
			if err != nil {
				t.Fatal(err)
			}
			srv, err := New(Config{Breaker: served, Tokens: []Token{NewToken("workers", PermDecide|PermReport, tokWorker)}, RecoveryDelay: recovery})
			if err != nil {
				t.Fatal(err)
			}
			api := httptest.NewServer(srv.Handler())
			defer api.Close()
			tg := &target{workers: map[string]bool{}, answered: map[string]time.Time{}, want: 3, all: make(chan struct{}), tr: tr, recovery: recovery}
			dest := httptest.NewServer(tg)
			defer dest.Close()
			url := dest.URL + "/inbox"

			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			const messages = 2
			var wg sync.WaitGroup
			results := map[string][]event{}
			errs := map[string]error{}
			var mu sync.Mutex
			run := func(worker string, f func() ([]event, error)) {
				wg.Go(func() {
					evs, err := f()
					mu.Lock()
					defer mu.Unlock()
					results[worker], errs[worker] = evs, err
					if err != nil {
						// The others wait for this one at the target.
						cancel()
					}
				})
			}
			n := fmt.Sprint(messages)
			run("node", func() ([]event, error) {
				return runExample(ctx, tokWorker, "node", filepath.Join(examples, "worker.mjs"), api.URL, url, n, "node")
			})
			run("python", func() ([]event, error) {
				return runExample(ctx, tokWorker, "python3", filepath.Join(examples, "worker.py"), api.URL, url, n, "python")
			})
			run("go", func() ([]event, error) { return goWorker(ctx, inproc, url, messages) })
			wg.Wait()
			_ = inproc.Close(context.Background())
			_ = served.Close(context.Background())
			for w, err := range errs {
				if err != nil {
					t.Fatalf("worker %s: %v", w, err)
				}
			}

			if tr.toOpen != 1 {
				t.Errorf("%d transitions to open fleet-wide, want 1", tr.toOpen)
			}
			probes := 0
			var firstHold []time.Time
			for _, w := range []string{"node", "python", "go"} {
				evs := results[w]
				var held *time.Time
				delivered := map[int]bool{}
				for i, e := range evs {
					if e.Error != nil {
						t.Errorf("%s: a store error: %s", w, *e.Error)
					}
					if e.Decision == "probe" {
						probes++
					}
					if e.Decision == "hold" && held == nil {
						held = e.RetryAt
					}
					// The last decision of a message sent it, and it was
					// accepted (the worker moved on).
					if i == len(evs)-1 || evs[i+1].Message != e.Message {
						delivered[e.Message] = e.Decision == "send" || e.Decision == "probe"
					}
				}
				if held == nil {
					t.Errorf("%s was never held: %+v", w, evs)
					continue
				}
				firstHold = append(firstHold, *held)
				for m := range messages {
					if !delivered[m] {
						t.Errorf("%s: message %d not delivered: %+v", w, m, evs)
					}
				}
			}
			if probes != 1 {
				t.Errorf("%d probes fleet-wide, want 1: %+v", probes, results)
			}
			for i := 1; i < len(firstHold); i++ {
				if !firstHold[i].Equal(firstHold[0]) {
					t.Errorf("workers hold until different instants: %v", firstHold)
				}
			}
			tr.mu.Lock()
			opened, closed := tr.opened, tr.closed
			tr.mu.Unlock()
			// From the opening until the probe was answered (the circuit
			// closes only after that), the probe is the only delivery
			// decided. A delivery decided before the opening may still
			// arrive after it, so only those whose worker had been
			// answered after the opening, and so decided after it, are
			// counted: a Breaker that sends while restrained sends again
			// after its 503 and is caught.
			tg.mu.Lock()
			answered := tg.firstOK
			during := 0
			for _, a := range tg.arrivals {
				if a.prev.After(opened) && a.at.Before(answered) && !a.ok {
					during++
				}
			}
			tg.mu.Unlock()
			if closed.IsZero() || answered.IsZero() || during != 0 {
				t.Errorf("%d deliveries besides the probe were decided after the opening (%v) and arrived before the probe was answered (%v), want 0; closed at %v", during, opened, answered, closed)
			}
		})
	}
}
