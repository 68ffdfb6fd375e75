package conformance_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/conformcheck"
)

// coarse declares a one-second granularity over a memory store.
type coarse struct{ *memory.Store }

func (s coarse) Traits() driver.Traits {
	t := s.Store.Traits()
	t.Expiry.Granularity = time.Second
	return t
}

// disagreeing makes a plain memory store first and coarse ones after: two
// stores of one harness that declare different Traits.
type disagreeing struct {
	mu sync.Mutex
	n  int
}

func (h *disagreeing) MakeStore(context.Context) (driver.Store, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	if h.n == 1 {
		return memory.New(), nil
	}
	return coarse{memory.New()}, nil
}

func (h *disagreeing) Close() {}

// TestTraitsStoresDisagree is the traits case's negative control: a harness
// whose second store declares other Traits than its first fails it. A
// traits case that compared the first store's Traits with themselves would
// let this harness through ("the suite found nothing wrong").
func TestTraitsStoresDisagree(t *testing.T) {
	t.Parallel()
	rep, err := measure(t, &disagreeing{}, conformance.WithSkipSlow(true), only("traits"))
	wantBroken(t, rep, err, "traits", "traits-stable")
}

// panicky panics in the calls named by op, from whatever goroutine makes
// them (the linearizability case calls from eight).
type panicky struct {
	*memory.Store
	op string
}

func (s panicky) CompareAndSwap(ctx context.Context, key string, old driver.Version, v []byte, ttl time.Duration) (driver.Version, error) {
	if s.op == "cas" && strings.HasPrefix(key, "linearizable") {
		panic("panicky: CompareAndSwap")
	}
	return s.Store.CompareAndSwap(ctx, key, old, v, ttl)
}

func (s panicky) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	if s.op == "delete" {
		panic("panicky: CompareAndDelete")
	}
	return s.Store.CompareAndDelete(ctx, key, old)
}

// panickyHarness panics in MakeStore after the first few stores.
type panickyHarness struct {
	mu    sync.Mutex
	n     int
	after int
}

func (h *panickyHarness) MakeStore(context.Context) (driver.Store, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n++; h.n > h.after {
		panic("panickyHarness: MakeStore")
	}
	return memory.New(), nil
}

func (h *panickyHarness) Close() {}

// TestPanicsAreProblems: a store or harness that panics, in the case's
// goroutine or in one the case started, fails the case with "no-panic"
// and the run goes on to the next case.
func TestPanicsAreProblems(t *testing.T) {
	t.Parallel()
	t.Run("store-in-case-goroutines", func(t *testing.T) {
		t.Parallel()
		rep, err := measure(t, memoryHarness(func(s *memory.Store) driver.Store { return panicky{s, "cas"} }), conformance.WithSkipSlow(true))
		wantBroken(t, rep, err, "concurrent-cas-linearizable", "no-panic")
		for _, r := range rep.Results {
			if r.Case == "lost-answer-breaker" && r.Skipped == "" && !r.Passed() {
				t.Errorf("the case after the panic did not run cleanly: %+v", r)
			}
		}
	})
	t.Run("store-in-case", func(t *testing.T) {
		t.Parallel()
		rep, err := measure(t, memoryHarness(func(s *memory.Store) driver.Store { return panicky{s, "delete"} }), conformance.WithSkipSlow(true), only("compare-and-delete"))
		wantBroken(t, rep, err, "compare-and-delete", "no-panic")
	})
	t.Run("harness", func(t *testing.T) {
		t.Parallel()
		rep, err := measure(t, &panickyHarness{after: 2}, conformance.WithSkipSlow(true))
		wantBroken(t, rep, err, "get-absent", "no-panic")
	})
	t.Run("harness-first-store", func(t *testing.T) {
		t.Parallel()
		rep, err := measure(t, &panickyHarness{after: 0}, conformance.WithSkipSlow(true), only("reachable"))
		wantBroken(t, rep, err, "reachable", "reachable")
	})
}

// TestResultsCarryIDs: every case of the table reports, in order, under its
// stable ID, with its promise and kind; the margin case is the one that
// checks the declaration rather than the store.
func TestResultsCarryIDs(t *testing.T) {
	t.Parallel()
	rep, err := measure(t, memoryHarness(plain), conformance.WithSkipSlow(true))
	if err != nil {
		t.Fatal(err)
	}
	ids := conformcheck.Cases()
	if len(rep.Results) != len(ids) {
		t.Fatalf("%d results for %d cases", len(rep.Results), len(ids))
	}
	for i, r := range rep.Results {
		if r.Case != ids[i] {
			t.Errorf("result %d is case %q, want %q", i, r.Case, ids[i])
		}
		if r.Promise == "" || r.PromiseText == r.Promise {
			t.Errorf("case %s: promise %q has no text", r.Case, r.Promise)
		}
		if want := r.Case == "margin-keeps-probes"; (r.Kind == conformcheck.KindDeclaration) != want {
			t.Errorf("case %s: kind %v", r.Case, r.Kind)
		}
	}
}

// runHelperEnv selects what TestRunHelper runs, in the child process that
// TestRunOneLoop starts.
const runHelperEnv = "CONFORMANCE_RUN_HELPER"

// TestRunHelper is not a test of its own: TestRunOneLoop runs it in a child
// process (go test -run) and reads its output, so Run's own reporting can be
// checked, failing subtests included.
func TestRunHelper(t *testing.T) {
	mode := os.Getenv(runHelperEnv)
	if mode == "" {
		t.Skip("run by TestRunOneLoop")
	}
	var opts []conformance.Option
	mk := func() conformance.Harness { return newCapable() }
	switch mode {
	case "panic":
		mk = func() conformance.Harness {
			return memoryHarness(func(s *memory.Store) driver.Store { return panicky{s, "delete"} })
		}
	case "bare":
		mk = func() conformance.Harness { return memoryHarness(plain) }
	case "capped":
		mk = func() conformance.Harness {
			return memoryHarness(func(s *memory.Store) driver.Store { return capped{s} })
		}
	case "waived":
		mk = func() conformance.Harness { return memoryHarness(plain) }
		opts = append(opts, conformance.Waive("state-ttl", stateTTLWaiver),
			conformance.Waive("foreign-value-replaced", foreignWaiver))
	case "no-reason":
		mk = func() conformance.Harness { return memoryHarness(plain) }
		opts = append(opts, conformance.Waive("state-ttl", " "))
	}
	conformance.Run(t, func(context.Context, *testing.T) (conformance.Harness, error) { return mk(), nil }, opts...)
}

// The reasons the waived runs give.
const (
	stateTTLWaiver = "memory keeps every TTL exactly (checked on fake time by backends/memory)"
	foreignWaiver  = "an in-process store holds only what this process's Breakers wrote"
)

// TestRunOneLoop runs Run in a child process: under -short it skips the
// cases that wait in real time (Run used to honour -short only through a
// separate entry point), it logs the report in the parent test rather than
// in a "report" subtest that always passed, it says that the margin case
// checks the declaration, and a store that panics fails its case instead
// of crashing the test binary.
func TestRunOneLoop(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts the test binary twice")
	}
	run := func(mode string, args ...string) (string, error) {
		args = append([]string{"-test.run=^TestRunHelper$", "-test.v", "-test.count=1"}, args...)
		cmd := exec.CommandContext(t.Context(), os.Args[0], args...)
		cmd.Env = append(os.Environ(), runHelperEnv+"="+mode)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("plain", "-test.short")
	if err != nil {
		t.Fatalf("Run on a memory store failed: %v\n%s", err, out)
	}
	for _, want := range []string{
		"--- SKIP: TestRunHelper/expiry ",
		"conformance report:",
		"margin-keeps-probes checks the declared Traits",
		"--- SKIP: TestRunHelper/not-verified",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "TestRunHelper/report") {
		t.Errorf("the report is still a subtest:\n%s", out)
	}
	out, err = run("panic", "-test.short")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("Run over a panicking store: %v, want exit status 1\n%s", err, out)
	}
	for _, want := range []string{
		"--- FAIL: TestRunHelper/compare-and-delete ",
		conformance.PromiseID("no-panic").Text(),
		"--- PASS: TestRunHelper/get-absent ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "goroutine ") {
		t.Errorf("the panic escaped:\n%s", out)
	}
}

// TestRunFailsClosed: Run over a bare memory store, through a harness with
// none of the capabilities (no TimeAdvancer or LifetimeReporter, no
// ForeignPlanter), fails, naming each unverified promise a Breaker relies
// on and the Waive call that would accept it, and prints no PASS for the
// state-ttl case; so does a store that caps every TTL at a minute, which
// that case cannot catch without a capability. With the waivers the run
// passes, the cases report WAIVED (SKIP, not PASS), and the report shows
// each waiver's reason. A waiver without a reason fails the run. Before
// Run failed closed, the bare and capped runs passed with "--- PASS:
// TestRunHelper/expiry-at-state-ttl" and only a skipped "not-verified".
func TestRunFailsClosed(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts the test binary four times, waiting in real time")
	}
	run := func(t *testing.T, mode string) (string, int) {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestRunHelper$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), runHelperEnv+"="+mode)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return string(out), 0
		case errors.As(err, &ee):
			return string(out), ee.ExitCode()
		}
		t.Fatalf("running the test binary: %v", err)
		return "", 0
	}
	want := func(t *testing.T, out string, wants []string, nots ...string) {
		t.Helper()
		for _, w := range wants {
			if !strings.Contains(out, w) {
				t.Errorf("the output lacks %q", w)
			}
		}
		for _, n := range nots {
			if strings.Contains(out, n) {
				t.Errorf("the output has %q", n)
			}
		}
		if t.Failed() {
			t.Logf("output:\n%s", out)
		}
	}
	stateTTL := "expiry-at-state-ttl"
	for _, mode := range []string{"bare", "capped"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			out, code := run(t, mode)
			if code != 1 {
				t.Errorf("exit status %d, want 1", code)
			}
			want(t, out, []string{
				"--- FAIL: TestRunHelper/" + stateTTL + " ",
				"--- FAIL: TestRunHelper/not-verified ",
				conformance.ErrNotVerified.Error(),
				`conformance.Waive("state-ttl", "why this store keeps it")`,
				`conformance.Waive("foreign-value-replaced", "why this store keeps it")`,
				"LifetimeReporter",
			}, "--- PASS: TestRunHelper/"+stateTTL+" ")
		})
	}
	t.Run("waived", func(t *testing.T) {
		t.Parallel()
		out, code := run(t, "waived")
		if code != 0 {
			t.Errorf("exit status %d, want 0", code)
		}
		want(t, out, []string{
			"--- SKIP: TestRunHelper/" + stateTTL + " ",
			"WAIVED: state-ttl",
			"WAIVED       " + stateTTL,
			"WAIVED       foreign-value-replaced",
			"waived by the harness: " + stateTTLWaiver,
			"waived by the harness: " + foreignWaiver,
			// Passed, or skipped when the machine's load left a
			// real-time measurement undecided; never failed.
			"TestRunHelper/not-verified (",
		}, "--- PASS: TestRunHelper/"+stateTTL+" ", "--- FAIL")
	})
	t.Run("no-reason", func(t *testing.T) {
		t.Parallel()
		out, code := run(t, "no-reason")
		if code != 1 {
			t.Errorf("exit status %d, want 1", code)
		}
		want(t, out, []string{"a waiver needs a reason"}, "--- PASS: TestRunHelper/")
	})
}
