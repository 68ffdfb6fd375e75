package conformance_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/conformcheck"
	"github.com/kvbreaker/kvbreaker/skew"
)

// sampling is a memory store that shows a clock through sample.
type sampling struct {
	*memory.Store
	sample func(ctx context.Context) (time.Time, time.Duration, error)
}

func (s sampling) SampleClock(ctx context.Context) (time.Time, time.Duration, error) {
	return s.sample(ctx)
}

// machineClock is a correct sampler: this machine's clock to the
// microsecond, as Redis TIME reads a server's.
func machineClock(ctx context.Context) (time.Time, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, 0, err
	}
	return time.Now().Round(0).Truncate(time.Microsecond), time.Microsecond, nil
}

// samplingHarness makes memory stores whose SampleClock is the one newSample
// makes for each store (so a sampler may keep state per store).
func samplingHarness(newSample func() func(context.Context) (time.Time, time.Duration, error)) conformance.Harness {
	return harness{make: func() driver.Store { return sampling{memory.New(), newSample()} }}
}

func clockResult(t *testing.T, rep *conformcheck.Report) conformcheck.Result {
	t.Helper()
	for _, r := range rep.Results {
		if r.Case == "clock-sampler" {
			return r
		}
	}
	t.Fatalf("no %s result:\n%s", "clock-sampler", rep)
	return conformcheck.Result{}
}

// TestClockSamplerPasses: correct samplers pass, this machine's clock and
// a server clock 90 s behind it at a resolution of 1 s (an HTTP Date
// header): the offset is never judged.
func TestClockSamplerPasses(t *testing.T) {
	t.Parallel()
	for name, h := range map[string]conformance.Harness{
		"machine clock, 1µs": samplingHarness(func() func(context.Context) (time.Time, time.Duration, error) { return machineClock }),
		"90s behind, 1s": harness{make: func() driver.Store {
			return &skew.ClockStore{Store: memory.New(), Resolution: time.Second,
				Clock: func() time.Time { return time.Now().Add(-90 * time.Second) }, Before: time.Millisecond, After: time.Millisecond}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rep, err := measure(t, h, conformance.WithSkipSlow(true))
			if err != nil {
				t.Fatalf("%v\n%s", err, rep)
			}
			r := clockResult(t, rep)
			if !r.Passed() || len(r.NotVerified) > 0 {
				t.Fatalf("%s did not pass: %+v", r.Case, r)
			}
			t.Log(r.Notes)
		})
	}
}

// TestClockSamplerBroken: each broken sampler fails the case's promise.
func TestClockSamplerBroken(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // the abandoned blocked calls end
	for name, newSample := range map[string]func() func(context.Context) (time.Time, time.Duration, error){
		"zero time": func() func(context.Context) (time.Time, time.Duration, error) {
			return func(ctx context.Context) (time.Time, time.Duration, error) {
				_, res, err := machineClock(ctx)
				return time.Time{}, res, err
			}
		},
		"zero resolution": func() func(context.Context) (time.Time, time.Duration, error) {
			return func(ctx context.Context) (time.Time, time.Duration, error) {
				t, _, err := machineClock(ctx)
				return t, 0, err
			}
		},
		"jumps back": func() func(context.Context) (time.Time, time.Duration, error) {
			var n atomic.Int32
			return func(ctx context.Context) (time.Time, time.Duration, error) {
				t, res, err := machineClock(ctx)
				if err == nil && n.Add(1) > 2 {
					t = t.Add(-10 * time.Second) // NTP stepped it back
				}
				return t, res, err
			}
		},
		"ignores context": func() func(context.Context) (time.Time, time.Duration, error) {
			return func(context.Context) (time.Time, time.Duration, error) {
				<-release
				return time.Now(), time.Microsecond, nil
			}
		},
		"stands still": func() func(context.Context) (time.Time, time.Duration, error) {
			frozen := time.Now().Round(0).Truncate(time.Microsecond)
			return func(ctx context.Context) (time.Time, time.Duration, error) {
				if err := ctx.Err(); err != nil {
					return time.Time{}, 0, err
				}
				return frozen, time.Microsecond, nil
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rep, err := measure(t, samplingHarness(newSample), conformance.WithSkipSlow(true))
			wantBroken(t, rep, err, "clock-sampler", "clock-sampler")
			for _, r := range rep.Results {
				if r.Case != "clock-sampler" && len(r.Problems) > 0 {
					t.Errorf("case %s failed too: %v", r.Case, r.Problems)
				}
			}
		})
	}
}

// TestClockSamplerNotApplicable: a store that is no driver.ClockSampler
// skips the case as not promised, naming its type, and the report does not
// count it as something left unverified.
func TestClockSamplerNotApplicable(t *testing.T) {
	t.Parallel()
	rep, err := measure(t, memoryHarness(plain), conformance.WithSkipSlow(true))
	if err != nil {
		t.Fatal(err)
	}
	r := clockResult(t, rep)
	if !r.NotPromised || !strings.Contains(r.Skipped, "(*memory.Store) does not implement driver.ClockSampler") {
		t.Errorf("skipped %q, not promised %v", r.Skipped, r.NotPromised)
	}
	if nv := strings.Join(rep.NotVerified(), "\n"); strings.Contains(nv, "clock-sampler") {
		t.Errorf("not-verified list names %s:\n%s", r.Case, nv)
	}
}
