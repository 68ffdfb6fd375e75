package dynamodb_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/internal/testservers/dynalite"
)

// TestFault takes this test's own dynalite down while workers are busy:
// killed (SIGKILL: connections refused) or paused (SIGSTOP: connections
// accepted and never answered, like a hung server or a partition). Every
// call must come back within the call deadline with an error and the
// configured fail-open / fail-closed verdict; once the server is back on the
// same endpoint (data kept on disk) the fleet must work again with the open
// circuit still open.
func TestFault(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a server: skipped under -short")
	}
	for _, tc := range []struct {
		name          string
		down, recover func(t *testing.T, s *dynalite.Server)
	}{
		{"kill-and-restart",
			func(t *testing.T, s *dynalite.Server) { s.Kill() },
			func(t *testing.T, s *dynalite.Server) {
				if err := s.Restart(t.Context()); err != nil {
					t.Fatal(err)
				}
			}},
		{"pause-and-resume",
			func(t *testing.T, s *dynalite.Server) {
				if err := s.Pause(); err != nil {
					t.Fatal(err)
				}
			},
			func(t *testing.T, s *dynalite.Server) {
				if err := s.Resume(); err != nil {
					t.Fatal(err)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) { faultScenario(t, tc.down, tc.recover) })
	}
}

func faultScenario(t *testing.T, down, recover func(*testing.T, *dynalite.Server)) {
	const (
		callTimeout = time.Second
		// slack covers scheduling on a loaded 2-core machine under -race.
		slack = 1500 * time.Millisecond
	)
	ctx := t.Context()
	own := dynalite.MustStart(t, dynalite.Persistent(t.TempDir()))
	if err := dynamodb.CreateTable(ctx, newClient(own.Endpoint), "fault"); err != nil {
		t.Fatal(err)
	}
	newBreakerWith := func(failClosed bool, callTimeout time.Duration) *kvbreaker.Breaker {
		st, err := dynamodb.New(newClient(own.Endpoint), "fault") // each worker brings its own client
		if err != nil {
			t.Fatal(err)
		}
		b, err := kvbreaker.New(st, kvbreaker.Settings{
			FailureThreshold: 1, RecoveryDelay: time.Hour,
			CallTimeout: callTimeout, FailClosed: failClosed,
		})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	newBreaker := func(failClosed bool) *kvbreaker.Breaker { return newBreakerWith(failClosed, callTimeout) }
	open, closed := newBreaker(false), newBreaker(true)
	// The set-up is not under test: on a loaded machine a healthy dynalite
	// answered its Failure after the 1 s CallTimeout under test.
	setup := newBreakerWith(true, 30*time.Second)
	if err := setup.Failure(ctx, "down.example"); err != nil {
		t.Fatal(err)
	}
	if v, err := setup.Allow(ctx, "down.example", time.Time{}); err != nil || v.Decision != kvbreaker.Hold {
		t.Fatalf("before the outage: %+v, %v; want hold", v, err)
	}

	// Workers: Allow then Success in a loop, timing every round.
	var (
		phase     atomic.Int32 // 0 up, 1 down, 2 back
		slowest   [3]atomic.Int64
		calls     [3]atomic.Int64
		failures  [3]atomic.Int64
		firstErrs sync.Map
		wg        sync.WaitGroup
		stop      = make(chan struct{})
	)
	for w := range 4 {
		b := newBreaker(w%2 == 1)
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p := phase.Load()
				host := fmt.Sprintf("busy-%d.example", i%8)
				start := time.Now()
				_, err := b.Allow(ctx, host, time.Time{})
				if err == nil {
					err = b.Success(ctx, host)
				}
				d := time.Since(start)
				if p != phase.Load() {
					continue // straddled the outage's start or end
				}
				calls[p].Add(1)
				if err != nil {
					failures[p].Add(1)
					firstErrs.LoadOrStore(p, err)
				}
				for old := slowest[p].Load(); int64(d) > old && !slowest[p].CompareAndSwap(old, int64(d)); old = slowest[p].Load() {
				}
			}
		})
	}
	stopWorkers := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
	defer stopWorkers()
	waitCalls := func(p int32, n int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for calls[p].Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("phase %d: only %d of %d worker rounds in 30s", p, calls[p].Load(), n)
			}
			<-tick.C
		}
	}
	waitCalls(0, 20)

	down(t, own)
	phase.Store(1)
	within := func(what string, f func() error) {
		t.Helper()
		start := time.Now()
		err := f()
		d := time.Since(start)
		if d > callTimeout+slack {
			t.Errorf("%s took %v with the server down, want ≤ %v", what, d, callTimeout+slack)
		}
		if err == nil {
			t.Errorf("%s: no error with the server down", what)
		} else if m := err.Error(); !strings.Contains(m, "dynamodb: get ") && !strings.Contains(m, "dynamodb: compare-and-swap ") ||
			!strings.Contains(m, "cannot reach dynamodb at "+own.Endpoint) && !strings.Contains(m, "no answer from dynamodb at "+own.Endpoint) {
			// Killed: connections refused; paused: accepted, never answered.
			// A Failure without a hint writes at once (it guesses the
			// record absent), so its error names the compare-and-swap.
			t.Errorf("%s: error %q does not name the backend, the operation and what happened at the endpoint", what, err)
		}
		noCredentials(t, err)
		t.Logf("%s with the server down: %v", what, d.Round(time.Millisecond))
	}
	within("Allow (fail-open)", func() error {
		v, err := open.Allow(ctx, "down.example", time.Time{})
		if v.Decision != kvbreaker.Send {
			t.Errorf("fail-open Allow with the server down = %v, want send", v.Decision)
		}
		return err
	})
	within("Allow (fail-closed)", func() error {
		v, err := closed.Allow(ctx, "down.example", time.Time{})
		if v.Decision != kvbreaker.Hold {
			t.Errorf("fail-closed Allow with the server down = %v, want hold", v.Decision)
		}
		return err
	})
	within("Failure", func() error { return open.Failure(ctx, "other.example") })
	waitCalls(1, 8)

	recover(t, own)
	phase.Store(2)
	// Clients reconnect by themselves; the first calls may still fail.
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := closed.Allow(ctx, "down.example", time.Time{})
		if err == nil {
			if v.Decision != kvbreaker.Hold {
				t.Fatalf("after recovery: %v, want hold (the open record is on disk)", v.Decision)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing 10s after recovery: %v", err)
		}
	}
	if err := open.Reset(ctx, "down.example"); err != nil {
		t.Fatal(err)
	}
	if v, err := closed.Allow(ctx, "down.example", time.Time{}); err != nil || v.Decision != kvbreaker.Send {
		t.Fatalf("after reset: %+v, %v; want send", v, err)
	}
	waitCalls(2, 8) // rounds that may have straddled recovery
	before := failures[2].Load()
	waitCalls(2, calls[2].Load()+20)
	stopWorkers()
	if after := failures[2].Load(); after > before {
		e, _ := firstErrs.Load(int32(2))
		t.Errorf("workers still failing after recovery: %d failures (first: %v)", after-before, e)
	}

	for p, name := range []string{"up", "down", "back"} {
		t.Logf("%-4s %4d worker rounds, %4d failed, slowest %v", name, calls[p].Load(), failures[p].Load(), time.Duration(slowest[p].Load()).Round(time.Millisecond))
	}
	if e, ok := firstErrs.Load(int32(1)); ok {
		t.Logf("a worker's error while down: %v", e)
	}
	if n, f := calls[1].Load(), failures[1].Load(); f != n {
		t.Errorf("%d of %d worker rounds succeeded with the server down", n-f, n)
	}
	// A round is Allow (fails) only; each call is bounded by CallTimeout.
	if d := time.Duration(slowest[1].Load()); d > callTimeout+slack {
		t.Errorf("slowest worker round while down: %v, want ≤ %v", d, callTimeout+slack)
	}
}
