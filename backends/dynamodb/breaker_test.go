package dynamodb_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
)

// transitions counts OnStateChange callbacks across a fleet.
type transitions struct {
	mu sync.Mutex
	n  map[string]int
}

func (tr *transitions) record(_ string, from, to kvbreaker.State) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.n == nil {
		tr.n = map[string]int{}
	}
	tr.n[from.String()+"→"+to.String()]++
}

func (tr *transitions) count(edge string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.n[edge]
}

func (tr *transitions) String() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return fmt.Sprint(tr.n)
}

// fleet returns n Breakers, each over its own Store (as separate worker
// processes would have), sharing one table, one key prefix and clk.
func fleet(t *testing.T, n int, clk *fakeClock, s kvbreaker.Settings) []*kvbreaker.Breaker {
	t.Helper()
	prefix := uniquePrefix(t)
	s.Clock = clk.Now
	bs := make([]*kvbreaker.Breaker, n)
	for i := range bs {
		st := newPrefixed(t, client, prefix, dynamodb.WithClock(clk.Now))
		var err error
		if bs[i], err = kvbreaker.New(st, s); err != nil {
			t.Fatal(err)
		}
	}
	return bs
}

// each runs f(i) on n goroutines at once and returns their errors, joined.
func each(n int, f func(i int) error) error {
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = f(i)
		})
	}
	close(start)
	wg.Wait()
	return errors.Join(errs...)
}

// TestBreakerFleet drives four Breakers over one dynalite table through a
// whole cycle with 16 goroutines at each step. Time is a shared fake clock:
// dynalite judges no time itself, so only the workers' clocks matter.
func TestBreakerFleet(t *testing.T) {
	const host, workers, goroutines = "inbox.example", 4, 16
	ctx := t.Context()
	clk := newFakeClock(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	var tr transitions
	bs := fleet(t, workers, clk, kvbreaker.Settings{
		FailureThreshold: 3,
		FailureWindow:    time.Minute,
		RecoveryDelay:    30 * time.Second,
		OnStateChange:    tr.record,
	})
	allowAll := func() (probes, holds, sends int, err error) {
		var p, h, s atomic.Int32
		err = each(goroutines, func(i int) error {
			v, err := bs[i%workers].Allow(ctx, host, time.Time{})
			switch v.Decision {
			case kvbreaker.Probe:
				p.Add(1)
			case kvbreaker.Hold:
				h.Add(1)
			case kvbreaker.Send:
				s.Add(1)
			}
			return err
		})
		return int(p.Load()), int(h.Load()), int(s.Load()), err
	}

	// closed: everyone sends.
	if p, h, s, err := allowAll(); err != nil || s != goroutines {
		t.Fatalf("closed: %d probes, %d holds, %d sends, err %v", p, h, s, err)
	}
	// 16 goroutines fail at once: the circuit opens exactly once.
	if err := each(goroutines, func(i int) error { return bs[i%workers].Failure(ctx, host) }); err != nil {
		t.Fatal(err)
	}
	if n := tr.count("closed→open"); n != 1 {
		t.Fatalf("closed→open fired %d times, want 1 (%v)", n, &tr)
	}
	st, err := bs[0].Inspect(ctx, host)
	if err != nil || st.State != kvbreaker.StateOpen || len(st.Failures) != 3 {
		t.Fatalf("after failures: %+v, %v", st, err)
	}
	opened := st.RestrainedUntil

	// open: everyone holds until the restraint ends.
	for i, b := range bs {
		v, err := b.Allow(ctx, host, time.Time{})
		if err != nil || v.Decision != kvbreaker.Hold || !v.RetryAt.Equal(opened) {
			t.Fatalf("worker %d while open: %+v, %v; want hold until %v", i, v, err, opened)
		}
	}
	// Failures while open write nothing.
	if err := bs[1].Failure(ctx, host); err != nil {
		t.Fatal(err)
	}
	if st2, _ := bs[2].Inspect(ctx, host); st2.Version != st.Version {
		t.Fatalf("a failure while open rewrote the record (version %d → %d)", st.Version, st2.Version)
	}

	// Recovery delay passes: exactly one probe is elected fleet-wide.
	clk.Set(opened)
	if p, h, s, err := allowAll(); err != nil || p != 1 || h != goroutines-1 || s != 0 {
		t.Fatalf("half-open election: %d probes, %d holds, %d sends, err %v", p, h, s, err)
	}
	if n := tr.count("open→half-open"); n != 1 {
		t.Fatalf("open→half-open fired %d times (%v)", n, &tr)
	}
	// The probe fails: one strike reopens.
	if err := bs[3].Failure(ctx, host); err != nil {
		t.Fatal(err)
	}
	if n := tr.count("half-open→open"); n != 1 {
		t.Fatalf("half-open→open fired %d times (%v)", n, &tr)
	}
	if p, h, s, err := allowAll(); err != nil || h != goroutines {
		t.Fatalf("reopened: %d probes, %d holds, %d sends, err %v", p, h, s, err)
	}

	// Next probe succeeds: the circuit closes and the record is gone.
	clk.Advance(30 * time.Second)
	if p, _, _, err := allowAll(); err != nil || p != 1 {
		t.Fatalf("second election: %d probes, err %v", p, err)
	}
	if err := bs[0].Success(ctx, host); err != nil {
		t.Fatal(err)
	}
	if n := tr.count("half-open→closed"); n != 1 {
		t.Fatalf("half-open→closed fired %d times (%v)", n, &tr)
	}
	if st, err := bs[1].Inspect(ctx, host); err != nil || st.Found {
		t.Fatalf("after success: %+v, %v; want no record", st, err)
	}
	if p, h, s, err := allowAll(); err != nil || s != goroutines {
		t.Fatalf("closed again: %d probes, %d holds, %d sends, err %v", p, h, s, err)
	}
	t.Logf("transitions: %v", &tr)
}

// TestBreakerRecordOutlivesRecovery checks the derived StateTTL against the
// store's expiry: the open record is still there when the probe is due, and
// gone once it can no longer matter.
func TestBreakerRecordOutlivesRecovery(t *testing.T) {
	const host = "slow.example"
	ctx := t.Context()
	clk := newFakeClock(time.Date(2026, 11, 30, 9, 0, 0, 123_000_000, time.UTC))
	bs := fleet(t, 2, clk, kvbreaker.Settings{FailureThreshold: 1, FailureWindow: 10 * time.Second, RecoveryDelay: 20 * time.Second})
	if err := bs[0].Failure(ctx, host); err != nil {
		t.Fatal(err)
	}
	ttl := bs[0].StateTTL()
	if want := 20*time.Second + kvbreaker.DefaultTTLMargin; ttl != want {
		t.Fatalf("StateTTL = %v, want %v", ttl, want)
	}
	clk.Advance(20 * time.Second) // the probe is due: the record must be there
	if v, err := bs[1].Allow(ctx, host, time.Time{}); err != nil || v.Decision != kvbreaker.Probe {
		t.Fatalf("at the recovery instant: %+v, %v; want probe", v, err)
	}
	// The probe rewrote the record at +20s; it lives until ceil(+20s+ttl).
	clk.Advance(ttl + time.Second)
	if st, err := bs[0].Inspect(ctx, host); err != nil || st.Found {
		t.Fatalf("after the record's TTL: %+v, %v; want it expired", st, err)
	}
}

// TestBreakerRefusesSkewBeyondPurgeDelay: the purge delay is the clock skew
// the store's physical expiry covers (Traits), and NewBreaker holds
// Settings.ClockSkew to it. Fails on main before #12 (6059c87^): the store
// declared no MaxClockSkew, so a 1 s purge delay took any ClockSkew.
func TestBreakerRefusesSkewBeyondPurgeDelay(t *testing.T) {
	for _, tc := range []struct {
		name    string
		purge   time.Duration
		skew    time.Duration
		refused bool
	}{
		{"skew-above-purge-delay", time.Second, 2 * time.Second, true},
		{"skew-above-rounded-purge-delay", 1500 * time.Millisecond, 2*time.Second + time.Millisecond, true},
		// Controls: the check can pass.
		{"skew-equal-to-purge-delay", time.Second, time.Second, false},
		{"skew-within-rounded-purge-delay", 1500 * time.Millisecond, 2 * time.Second, false},
		{"default-purge-delay", 0, time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []dynamodb.Option
			if tc.purge > 0 {
				opts = append(opts, dynamodb.WithPurgeDelay(tc.purge))
			}
			_, err := kvbreaker.New(newStore(t, opts...), kvbreaker.Settings{ClockSkew: tc.skew})
			switch {
			case tc.refused && err == nil:
				t.Fatalf("ClockSkew %v over a %v purge delay was accepted", tc.skew, tc.purge)
			case tc.refused && !strings.Contains(err.Error(), "dynamodb.WithPurgeDelay"):
				t.Fatalf("the refusal does not name the option to raise: %v", err)
			case !tc.refused && err != nil:
				t.Fatalf("ClockSkew %v over a %v purge delay refused: %v", tc.skew, tc.purge, err)
			}
		})
	}
}
