package adapter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// storeClock is a store's clock as a follower's clock sees it: at local
// instant l it reads offset + (l − origin)·(1 + ppm/10⁶), truncated to
// unit, as PostgreSQL's clock_timestamp() and Redis's TIME answer.
type storeClock struct {
	origin time.Time
	offset time.Duration
	ppm    float64
	unit   time.Duration
}

func (s storeClock) at(l time.Time) time.Time {
	d := l.Sub(s.origin)
	return s.origin.Add(s.offset + d + time.Duration(float64(d)*s.ppm/1e6)).Truncate(s.unit)
}

// sampler answers a BeatClock's samples from s, the request taking up to
// and the answer back each up to lat; now is the local instant the next
// sample starts at.
type sampler struct {
	s   storeClock
	rng *rand.Rand
	lat time.Duration
	now time.Time
	n   int
}

func (p *sampler) sample(context.Context) (before, server, after time.Time, err error) {
	p.n++
	before = p.now
	read := before.Add(time.Duration(p.rng.Int64N(int64(p.lat) + 1)))
	after = read.Add(time.Duration(p.rng.Int64N(int64(p.lat) + 1)))
	return before, p.s.at(read), after, nil
}

const testDriftPPM = 500

func newTestClock(p *sampler) *BeatClock {
	return &BeatClock{Sample: p.sample, Every: 30 * time.Second, Fresh: 5 * time.Second, DriftPPM: testDriftPPM, Unit: time.Microsecond}
}

// laterThanTrue runs beats through convert on clocks of every offset and
// drift rate within DriftPPM, sampled before and after each beat, and
// lists the conversions later than the local instant the store's clock
// dated the beat at: what a lower bound must never be.
func laterThanTrue(t *testing.T, convert func(c *BeatClock, tb, arrival time.Time) time.Time) []string {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	origin := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var bad []string
	for i := range 2000 {
		s := storeClock{origin: origin, unit: time.Microsecond,
			offset: time.Duration(rng.Int64N(int64(2*time.Hour))) - time.Hour,
			ppm:    (2*rng.Float64() - 1) * testDriftPPM}
		switch i % 4 {
		case 0:
			s.ppm = testDriftPPM
		case 1:
			s.ppm = -testDriftPPM
		}
		p := &sampler{s: s, rng: rng, lat: time.Duration(rng.Int64N(int64(20 * time.Millisecond)))}
		c := newTestClock(p)
		// The sample up to 30 s before or after the beat ran (a
		// follower samples when a beat of another arrives).
		ran := origin.Add(time.Minute + time.Duration(rng.Int64N(int64(10*time.Minute))))
		p.now = ran.Add(time.Duration(rng.Int64N(int64(60*time.Second))) - 30*time.Second)
		if err := c.Refresh(t.Context(), p.now, true); err != nil {
			t.Fatal(err)
		}
		tb := s.at(ran)
		arrival := ran.Add(time.Duration(rng.Int64N(int64(50 * time.Millisecond))))
		if at := convert(c, tb, arrival); at.After(ran) {
			bad = append(bad, fmt.Sprintf("clock %+.0f ppm, offset %v: beat ran at %v, converted to %v", s.ppm, s.offset, ran.Format(time.StampMicro), at.Format(time.StampMicro)))
		}
	}
	return bad
}

// TestBeatClockLowerBound: a beat's time converted by a sample of the
// store's clock is never later than the local instant the beat ran at,
// whatever the offset of the two clocks, their drift within DriftPPM,
// the latency of the sample, and whether the sample came before or after
// the beat. The controls: a conversion without the drift allowance, and
// one that dates a beat at its arrival, are caught by the same check.
func TestBeatClockLowerBound(t *testing.T) {
	if bad := laterThanTrue(t, func(c *BeatClock, tb, _ time.Time) time.Time { return c.Convert(tb) }); len(bad) > 0 {
		t.Errorf("%d conversions later than the beat, e.g. %s", len(bad), bad[0])
	}
	controls := map[string]func(c *BeatClock, tb, arrival time.Time) time.Time{
		"no drift allowance": func(c *BeatClock, tb, _ time.Time) time.Time {
			return c.before.Add(tb.Sub(c.server) - c.Unit)
		},
		"dated at arrival": func(_ *BeatClock, _, arrival time.Time) time.Time { return arrival },
		"sample's answer as its reading": func(c *BeatClock, tb, _ time.Time) time.Time {
			d := tb.Sub(c.server)
			return c.after.Add(d - c.Unit - c.Drift(d))
		},
	}
	for name, conv := range controls {
		if bad := laterThanTrue(t, conv); len(bad) == 0 {
			t.Errorf("control %q: no conversion caught later than its beat", name)
		}
	}
}

// TestBeatClockServerAt: a sender's lower bound of the store's clock is
// never later than the store's clock at that instant, whatever the drift
// within DriftPPM; without the drift allowance it is (the control).
func TestBeatClockServerAt(t *testing.T) {
	origin := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, ppm := range []float64{-testDriftPPM, 0, testDriftPPM} {
		s := storeClock{origin: origin, offset: 3 * time.Second, ppm: ppm, unit: time.Microsecond}
		p := &sampler{s: s, rng: rand.New(rand.NewPCG(3, 4)), lat: 5 * time.Millisecond, now: origin}
		c := newTestClock(p)
		if err := c.Refresh(t.Context(), origin, false); err != nil {
			t.Fatal(err)
		}
		controlCaught := false
		for d := time.Duration(0); d <= 30*time.Second; d += 100 * time.Millisecond {
			now := origin.Add(d)
			if got, srv := c.ServerAt(now), s.at(now); got.After(srv) {
				t.Errorf("%+v ppm, %v after the sample: ServerAt %v, the store's clock %v", ppm, d, got.Format(time.StampMicro), srv.Format(time.StampMicro))
			}
			if c.server.Add(now.Sub(c.after)).After(s.at(now)) {
				controlCaught = true
			}
		}
		if ppm < 0 && !controlCaught {
			t.Errorf("control: a bound without the drift allowance was never later than a clock %v ppm slow", ppm)
		}
	}
}

// TestBeatClockDate: Date samples the first time and then only when the
// sample is Every old; a beat dated ahead of its arrival is late after
// one fresh sample (none when the sample is younger than Fresh); a
// reading observed another way stands for a sample; a sample's error is
// returned.
func TestBeatClockDate(t *testing.T) {
	origin := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := storeClock{origin: origin, offset: -time.Hour, unit: time.Microsecond}
	p := &sampler{s: s, rng: rand.New(rand.NewPCG(5, 6)), lat: time.Millisecond, now: origin}
	c := newTestClock(p)
	check := func(name string, ran, arrival time.Time, wantLate bool, wantSamples int) {
		t.Helper()
		p.now = arrival
		at, late, err := c.Date(t.Context(), s.at(ran), arrival)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if late != wantLate {
			t.Errorf("%s: late %v (converted to %v, arrived %v), want %v", name, late, at.Format(time.StampMicro), arrival.Format(time.StampMicro), wantLate)
		}
		if !late && at.After(ran) {
			t.Errorf("%s: converted to %v, after the beat ran at %v", name, at.Format(time.StampMicro), ran.Format(time.StampMicro))
		}
		if c.Samples() != wantSamples {
			t.Errorf("%s: %d samples in all, want %d", name, c.Samples(), wantSamples)
		}
	}
	t0 := origin.Add(time.Second)
	check("first beat", t0, t0.Add(time.Millisecond), false, 1)
	check("within Every", t0.Add(20*time.Second), t0.Add(20*time.Second+time.Millisecond), false, 1)
	check("forged, sample older than Fresh", t0.Add(27*time.Second), t0.Add(25*time.Second), true, 2)
	check("forged, sample fresh", t0.Add(28*time.Second), t0.Add(26*time.Second), true, 2)
	check("past Every", t0.Add(60*time.Second), t0.Add(60*time.Second+time.Millisecond), false, 3)

	// A reading observed another way (a beat of the follower's own)
	// replaces an older sample, and spares the next; an older one
	// does not.
	obs := t0.Add(100 * time.Second)
	c.Observe(obs, s.at(obs.Add(time.Millisecond)), obs.Add(2*time.Millisecond))
	c.Observe(obs.Add(-time.Second), s.at(obs), obs)
	check("after an observed reading", obs.Add(10*time.Second), obs.Add(10*time.Second+time.Millisecond), false, 3)
	if c.before != obs {
		t.Errorf("the sample is of %v, want the newest observed, of %v", c.before.Format(time.StampMicro), obs.Format(time.StampMicro))
	}

	failing := &BeatClock{Sample: func(context.Context) (time.Time, time.Time, time.Time, error) {
		return time.Time{}, time.Time{}, time.Time{}, errors.New("refused")
	}, Every: time.Second}
	if _, _, err := failing.Date(t.Context(), origin, origin); err == nil {
		t.Error("Date returned no error when its sample failed")
	}
	if _, _, err := (&BeatClock{}).Date(t.Context(), origin, origin); !errors.Is(err, errNoSample) {
		t.Errorf("Date without Sample: %v, want the error that says to set it", err)
	}
}
