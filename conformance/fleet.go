package conformance

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/skew"
)

// checkFleet runs three Breakers with clocks skewed up to ±ClockSkew over
// the store: one fast, one slow, one right. Their clocks run on a simulated
// true time (the record's TTL is minutes, so the store never sees it pass).
func checkFleet(ctx context.Context, e *env) {
	const host = "fleet.example"
	d := e.opts.ClockSkew
	truth := skew.NewManual(time.Now().Truncate(time.Second))
	clocks := []*skew.Clock{
		{Base: truth.Now, Offset: d, Bound: d},
		{Base: truth.Now, Offset: -d, Bound: d},
		{Base: truth.Now},
	}
	var (
		mu          sync.Mutex
		transitions []string
	)
	settings := kvbreaker.Settings{
		FailureThreshold: 2,
		FailureWindow:    30 * time.Second,
		RecoveryDelay:    time.Minute,
		ReleaseInterval:  time.Second,
		ClockSkew:        d,
		CallTimeout:      30*time.Second + e.traits.MinWriteInterval,
		Logger:           slog.New(slog.DiscardHandler),
		OnStateChange: func(_ string, from, to kvbreaker.State) {
			mu.Lock()
			transitions = append(transitions, from.String()+"→"+to.String())
			mu.Unlock()
		},
	}
	fleet := make([]*kvbreaker.Breaker, len(clocks))
	for i, c := range clocks {
		s := settings
		s.Clock = c.Now
		b, err := kvbreaker.New(e.store, s)
		if err != nil {
			e.errorf(promiseFleet, "kvbreaker.New over the store's declared traits: %v", err)
			return
		}
		fleet[i] = b
	}
	wait := settings.RecoveryDelay + 2*d + time.Millisecond

	// allowAll asks every worker at once and returns their decisions.
	allowAll := func() ([]kvbreaker.Decision, bool) {
		out := make([]kvbreaker.Decision, len(fleet))
		errs := make([]error, len(fleet))
		var wg sync.WaitGroup
		for i, b := range fleet {
			wg.Go(func() {
				v, err := b.Allow(ctx, host, time.Time{})
				out[i], errs[i] = v.Decision, err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				e.errorf(promiseFleet, "worker %d: Allow(%q) = %v", i, host, err)
				return out, false
			}
		}
		return out, true
	}
	// expectAll polls (up to the declared ReadStaleness) until every worker
	// decides want.
	expectAll := func(step string, want kvbreaker.Decision) bool {
		deadline := time.Now().Add(e.traits.ReadStaleness)
		for {
			got, ok := allowAll()
			if !ok {
				return false
			}
			if !slices.ContainsFunc(got, func(d kvbreaker.Decision) bool { return d != want }) {
				return true
			}
			if time.Now().After(deadline) {
				e.errorf(promiseFleet, "%s: workers decided %v, want all %v", step, got, want)
				return false
			}
			if sleep(ctx, 100*time.Millisecond) != nil {
				return false
			}
		}
	}
	// probe advances true time past the restraint and expects one probe.
	probe := func(step string) (int, bool) {
		truth.Advance(wait)
		got, ok := allowAll()
		if !ok {
			return -1, false
		}
		probers := []int{}
		for i, dec := range got {
			switch dec {
			case kvbreaker.Probe:
				probers = append(probers, i)
			case kvbreaker.Hold:
			default:
				e.errorf(promiseFleet, "%s: worker %d decided %v, want probe or hold", step, i, dec)
				return -1, false
			}
		}
		switch {
		case len(probers) == 0:
			e.errorf(promiseFleet, "%s: no worker got the probe once every clock had passed the restraint (decisions %v)", step, got)
			return -1, false
		case len(probers) > 1 && e.traits.Atomic:
			e.errorf(promiseFleet, "%s: workers %v all got the probe; an atomic store elects exactly one (decisions %v)", step, probers, got)
			return -1, false
		}
		return probers[0], true
	}
	// write runs a Breaker write and reports its failure. On a store with
	// stale reads it then waits (up to the declared ReadStaleness) until a
	// Get sees the write, so the next read-modify-write does not lose it
	// (a stale read losing it is the declared behaviour, not a fault).
	write := func(step string, w func() error) bool {
		_, before, _ := e.store.Get(ctx, host)
		if err := w(); err != nil {
			e.errorf(promiseFleet, "%s: %v", step, err)
			return false
		}
		deadline := time.Now().Add(e.traits.ReadStaleness)
		for time.Now().Before(deadline) {
			_, now, err := e.store.Get(ctx, host)
			if now != before || (before != driver.NoVersion && errors.Is(err, driver.ErrNotFound)) {
				break
			}
			if sleep(ctx, min(100*time.Millisecond, e.traits.ReadStaleness/20)) != nil {
				return false
			}
		}
		return true
	}

	// Open: two failures from two workers trip the circuit.
	if !write("first failure", func() error { return fleet[0].Failure(ctx, host) }) ||
		!write("second failure", func() error { return fleet[1].Failure(ctx, host) }) ||
		!expectAll("after the circuit opened", kvbreaker.Hold) {
		return
	}
	// A single probe; its failure reopens the circuit at once.
	p, ok := probe("first probe")
	if !ok || !write("probe failure", func() error { return fleet[p].Failure(ctx, host) }) ||
		!expectAll("after the probe failed", kvbreaker.Hold) {
		return
	}
	p, ok = probe("second probe")
	if !ok || !write("probe success", func() error { return fleet[p].Success(ctx, host) }) ||
		!expectAll("after the probe succeeded", kvbreaker.Send) {
		return
	}
	mu.Lock()
	got := slices.Clone(transitions)
	mu.Unlock()
	want := []string{"closed→open", "open→half-open", "half-open→open", "open→half-open", "half-open→closed"}
	if e.traits.Atomic && !slices.Equal(got, want) {
		e.errorf(promiseFleet, "OnStateChange fired %v across the fleet, want %v, each once", got, want)
	}
	e.logf("transitions across 3 workers skewed by ±%v: %v", d, got)
}
