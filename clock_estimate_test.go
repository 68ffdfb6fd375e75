package kvbreaker

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
)

// The tests in this file kill mutants of clock.go (go run ./tools/mutants
// -pkg . -files clock.go) that the other tests let live. They
// feed clockCheck.add samples directly.

// TestClockEstimateIntersects: the estimate is the intersection of every
// sample that agrees, the oldest included; its interval holds the whole
// intersection, to the nanosecond; samples that only touch still agree.
func TestClockEstimateIntersects(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	for _, tc := range []struct {
		name    string
		samples [][2]time.Duration
		lo, hi  time.Duration // the intersection
	}{
		{"one", [][2]time.Duration{{-10 * ms, 10 * ms}}, -10 * ms, 10 * ms},
		{"odd width", [][2]time.Duration{{0, 21}}, 0, 21},
		{"two", [][2]time.Duration{{-10 * ms, 10 * ms}, {0, 30 * ms}}, 0, 10 * ms},
		{"oldest narrows", [][2]time.Duration{{0, 10 * ms}, {-20 * ms, 20 * ms}, {-30 * ms, 30 * ms}}, 0, 10 * ms},
		{"touching", [][2]time.Duration{{0, 10 * ms}, {10 * ms, 20 * ms}}, 10 * ms, 10 * ms},
		{"disjoint: the older dropped", [][2]time.Duration{{0, 10 * ms}, {11 * ms, 20 * ms}}, 11 * ms, 20 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &clockCheck{skew: time.Second}
			var o ClockOffset
			for _, s := range tc.samples {
				o, _ = c.add(clockSample{lo: s[0], hi: s[1], at: at})
			}
			lo, hi := o.Offset-o.Uncertainty, o.Offset+o.Uncertainty
			if lo > tc.lo || hi < tc.hi || o.Uncertainty > (tc.hi-tc.lo)/2+1 {
				t.Fatalf("estimate %v ± %v = [%v, %v]; want the least interval holding [%v, %v]", o.Offset, o.Uncertainty, lo, hi, tc.lo, tc.hi)
			}
		})
	}
}

// TestClockEstimateKeepsAgreeingSamples: agreeing samples are kept, up to
// keptSamples; a disagreeing one drops every older one.
func TestClockEstimateKeepsAgreeingSamples(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	c := &clockCheck{skew: time.Second}
	for i := range keptSamples + 2 {
		c.add(clockSample{lo: -time.Millisecond, hi: time.Millisecond, at: at})
		if n, want := len(c.samples), min(i+1, keptSamples); n != want {
			t.Fatalf("after %d agreeing samples %d are kept; want %d", i+1, n, want)
		}
	}
	c.add(clockSample{lo: time.Second, hi: time.Second + time.Millisecond, at: at})
	if len(c.samples) != 1 {
		t.Fatalf("after a disagreeing sample %d are kept; want 1", len(c.samples))
	}
}

// TestClockEstimateWidensByAge: an older sample counts widened by its age
// times driftRate, whichever order the samples' instants come in.
func TestClockEstimateWidensByAge(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	const age = 1000 * time.Second // widens by 15 ms
	ms := time.Millisecond
	for _, d := range []time.Duration{age, -age} {
		c := &clockCheck{skew: time.Second}
		c.add(clockSample{lo: 0, hi: 10 * ms, at: at})
		// Overlaps the old sample only once it is widened by 15 ms.
		o, _ := c.add(clockSample{lo: 20 * ms, hi: 40 * ms, at: at.Add(d)})
		if lo, hi := o.Offset-o.Uncertainty, o.Offset+o.Uncertainty; lo < 20*ms || hi > 25*ms+1 {
			t.Fatalf("newer sample %v later: estimate [%v, %v]; want [20ms, 25ms]", d, lo, hi)
		}
	}
}

// TestClockWarnBoundary: a warning needs the whole interval beyond
// ClockSkew; an interval that reaches exactly ±ClockSkew is no proof.
func TestClockWarnBoundary(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	const skew = time.Second
	for _, tc := range []struct {
		lo, hi time.Duration
		warn   bool
	}{
		{skew, skew + time.Millisecond, false},
		{skew + 1, skew + time.Millisecond, true},
		{-skew - time.Millisecond, -skew, false},
		{-skew - time.Millisecond, -skew - 1, true},
	} {
		c := &clockCheck{skew: skew}
		if _, warn := c.add(clockSample{lo: tc.lo, hi: tc.hi, at: at}); warn != tc.warn {
			t.Errorf("[%v, %v]: warn %v, want %v", tc.lo, tc.hi, warn, tc.warn)
		}
	}
}

// TestClockWarningUnits: the warning states offset and uncertainty to the
// millisecond once the uncertainty is a millisecond or more, and to the
// microsecond below.
func TestClockWarningUnits(t *testing.T) {
	var logs bytes.Buffer
	b, err := New(memory.New(), Settings{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		o    ClockOffset
		want string
	}{
		{ClockOffset{Offset: 2345678 * time.Microsecond, Uncertainty: time.Millisecond}, "is 2.346s ± 1ms behind"},
		{ClockOffset{Offset: -2345678 * time.Microsecond, Uncertainty: 999 * time.Microsecond}, "is 2.345678s ± 999µs ahead of"},
	} {
		logs.Reset()
		b.warnClock(tc.o)
		if !strings.Contains(logs.String(), tc.want) {
			t.Errorf("warning for %+v: %q; want it to say %q", tc.o, logs.String(), tc.want)
		}
	}
}

// samplingStore is a memory store that can read its clock (its own
// process's) and presents itself as a remote one, so a Breaker checks it
// in the background.
type samplingStore struct{ *memory.Store }

func (s samplingStore) Traits() driver.Traits {
	t := s.Store.Traits()
	t.InProcess = false
	return t
}

func (samplingStore) SampleClock(context.Context) (time.Time, time.Duration, error) {
	return time.Now(), 0, nil
}

// TestClockCheckAfterCloseReleasesLock: a call that finds the background
// checks closed (one racing with Close) starts no sample and leaves the
// lock that orders starts against Close free.
func TestClockCheckAfterCloseReleasesLock(t *testing.T) {
	b, err := New(samplingStore{memory.New()}, Settings{ClockCheckInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.maybeCheckClock(time.Now()) // due (next is 0), and closed
	if !b.clk.bgMu.TryLock() {
		t.Fatal("the closed path left bgMu locked: the next start or Close would wait forever")
	}
	b.clk.bgMu.Unlock()
	if _, ok := b.ClockOffset(); ok {
		t.Fatal("a sample ran after Close")
	}
}
