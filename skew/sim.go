package skew

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
)

// Timeline is the true time a simulation runs on.
type Timeline interface {
	Now() time.Time
	Sleep(d time.Duration)
}

// SystemTime is the time package's clock: inside a testing/synctest bubble
// it is the bubble's fake time, where Sleep returns as soon as every
// goroutine waits.
type SystemTime struct{}

// Now returns time.Now().
func (SystemTime) Now() time.Time { return time.Now() }

// Sleep calls time.Sleep.
func (SystemTime) Sleep(d time.Duration) { time.Sleep(d) }

// Sleep advances m by d, so a Manual is a Timeline.
func (m *Manual) Sleep(d time.Duration) { m.Advance(d) }

// MarginSim is a run of the demotion experiment (DESIGN §2): a fleet of
// Breakers with clocks skewed up to ±Skew shares one store distorted as
// Profile allows; one worker opens a host's circuit and another, holding a
// message for it, comes back exactly when its own clock reaches the
// restraint's end. The probe is demoted when the record has already expired
// there, so that worker sends instead of probing.
type MarginSim struct {
	Profile Profile
	// Skew is the fleet's clock-skew bound δ.
	Skew time.Duration
	// Margin is the TTLMargin the Breakers run with. Below
	// Profile.RequiredMargin(Skew) the store under-declares its traits,
	// since machine.NewConfig would reject the margin otherwise.
	Margin time.Duration
	// Trials is the number of randomised runs (default 500), each of
	// Rounds probe rounds (default 4) among Workers workers (default 3).
	Trials, Rounds, Workers int
	// Seed makes the run reproducible.
	Seed uint64
	// Time is true time: SystemTime{} inside a testing/synctest bubble,
	// or a *Manual. Nil means a Manual starting at 2000-01-01 UTC.
	Time Timeline
	// RecoveryDelay is the base recovery delay (default 30 min; each trial
	// adds a random sub-granularity part) and FailureWindow the window
	// (default 10 min). The margin is tight only when RecoveryDelay >=
	// FailureWindow: otherwise the window pads the TTL.
	RecoveryDelay, FailureWindow time.Duration
}

// MarginResult counts what a MarginSim saw.
type MarginResult struct {
	Profile  string
	Margin   time.Duration
	Required time.Duration
	// Due is how many times a worker reached the end of a restraint and
	// should have got the probe; Demoted how many of them (plus any hold
	// that turned into a send) found the record gone and sent instead.
	Due, Demoted int
	// Examples describe the first few demotions.
	Examples []string
}

// String summarises the result in one line.
func (r MarginResult) String() string {
	return fmt.Sprintf("%s: margin %v (required %v): %d of %d due probes demoted", r.Profile, r.Margin, r.Required, r.Demoted, r.Due)
}

func (s *MarginSim) defaults() {
	if s.Trials <= 0 {
		s.Trials = 500
	}
	if s.Rounds <= 0 {
		s.Rounds = 4
	}
	if s.Workers <= 0 {
		s.Workers = 3
	}
	if s.Time == nil {
		s.Time = NewManual(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	}
	if s.RecoveryDelay <= 0 {
		s.RecoveryDelay = 30 * time.Minute
	}
	if s.FailureWindow <= 0 {
		s.FailureWindow = 10 * time.Minute
	}
}

// drawPhase picks a phase in [0, g): with probability 1/3 zero, otherwise
// uniform to the millisecond.
func drawPhase(rng *rand.Rand, g time.Duration) time.Duration {
	if g < time.Millisecond || rng.IntN(3) == 0 {
		return 0
	}
	return time.Duration(rng.Int64N(int64(g/time.Millisecond))) * time.Millisecond
}

// Run runs the experiment. The error reports a setup problem or a store
// error, not demotions.
func (s MarginSim) Run(ctx context.Context) (MarginResult, error) {
	s.defaults()
	need := s.Profile.RequiredMargin(s.Skew)
	res := MarginResult{Profile: s.Profile.Name, Margin: s.Margin, Required: need}
	rng := rand.New(rand.NewPCG(s.Seed, 0x5eed))
	for trial := range s.Trials {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if err := s.trial(ctx, rng, trial, &res); err != nil {
			return res, fmt.Errorf("skew: %s trial %d: %w", s.Profile.Name, trial, err)
		}
	}
	return res, nil
}

func (s *MarginSim) trial(ctx context.Context, rng *rand.Rand, trial int, res *MarginResult) error {
	const host = "probe.example"
	tl := s.Time
	truth := tl.Now
	g := max(s.Profile.Traits.Expiry.Granularity, time.Second)
	d := s.Profile.Distortion(rng)
	margin := s.Margin
	if margin < time.Millisecond {
		// No store lets a Breaker run with less than the record's 1 ms
		// resolution: run with 1 ms over a store that expires the
		// difference earlier, which is the same.
		d.Early += time.Millisecond - margin
		margin = time.Millisecond
	}
	st := New(memory.New(memory.WithClock(truth)), d, truth)
	need := s.Profile.RequiredMargin(s.Skew)
	if s.Margin < need {
		// Under-state the store: exact, reader-filtered expiry needs only
		// the 1 ms tick, so NewConfig accepts the margin.
		t := s.Profile.Traits
		t.Expiry = driver.ExpiryModel{Kind: driver.ExpiryReaderFiltered, MinTTL: t.Expiry.MinTTL, Late: t.Expiry.Late}
		st.Declare(t)
	}
	clocks := Fleet(rng, truth, s.Workers, s.Skew, 1e-5)
	rd := s.RecoveryDelay + drawPhase(rng, g)
	fleet := make([]*kvbreaker.Breaker, s.Workers)
	for i, c := range clocks {
		set := kvbreaker.Settings{
			FailureThreshold: 2,
			FailureWindow:    s.FailureWindow,
			RecoveryDelay:    rd,
			ClockSkew:        s.Skew,
			TTLMargin:        margin,
			Clock:            c.Now,
			Logger:           slog.New(slog.DiscardHandler),
		}
		b, err := kvbreaker.New(st.View(c.Now), set)
		if err != nil {
			return err
		}
		fleet[i] = b
	}
	// Space writes to one key by the rate limit, and read-modify-writes
	// by the read staleness (a stale read would lose the previous write).
	gap := max(s.Profile.Traits.MinWriteInterval, s.Profile.Traits.ReadStaleness, time.Second)

	// sleepToPhase waits until worker w's clock is phase past a multiple
	// of g: the instant its next write lands on.
	sleepToPhase := func(w int) {
		phase := drawPhase(rng, g)
		now := clocks[w].Now()
		frac := time.Duration(now.UnixNano() % int64(g))
		tl.Sleep(gap + (phase-frac+g)%g)
	}

	writer := rng.IntN(s.Workers)
	if err := fleet[writer].Failure(ctx, host); err != nil {
		return err
	}
	sleepToPhase(writer)
	wrote := truth()
	if err := fleet[writer].Failure(ctx, host); err != nil {
		return err
	}
	for round := range s.Rounds {
		p := rng.IntN(s.Workers)
		b, c := fleet[p], clocks[p]
		// The prober first sees the record once any stale read shows it,
		// and holds a message for the host.
		tl.Sleep(gap)
		v, err := b.Allow(ctx, host, time.Time{})
		if err != nil {
			return err
		}
		switch v.Decision {
		case kvbreaker.Hold:
		case kvbreaker.Probe:
			// A last-writer-wins store cannot elect one prober: this one
			// probes too (declared, not a demotion).
			res.Due++
			writer, wrote = p, truth()
			continue
		default:
			res.Demoted++
			res.note(fmt.Sprintf("trial %d round %d: worker %d (clock %+v off) decided %v before the restraint ended; worker %d (clock %+v off) wrote the record at true %s",
				trial, round, p, c.ErrorAt(truth()), v.Decision, writer, clocks[writer].ErrorAt(wrote), wrote.Format("15:04:05.000000")))
			return nil
		}
		held := v.HeldSince
		var ru time.Time
		// Come back when this worker's clock reaches the restraint's end,
		// the worst instant a held message retries at (half-open holds
		// retry every ReleaseInterval and may land later).
		for range 16 {
			status, err := b.Inspect(ctx, host)
			if err != nil {
				return err
			}
			if status.Found && !status.RestrainedUntil.IsZero() {
				ru = status.RestrainedUntil
				tl.Sleep(max(c.Until(ru), time.Nanosecond))
			}
			if v, err = b.Allow(ctx, host, held); err != nil {
				return err
			}
			if v.Decision != kvbreaker.Hold {
				break
			}
		}
		res.Due++
		switch v.Decision {
		case kvbreaker.Probe:
		case kvbreaker.Send:
			res.Demoted++
			res.note(fmt.Sprintf("trial %d round %d: worker %d wrote the record at true %s (its clock %+v off) with TTL %v and restraint end %s; worker %d reached that end at true %s (its clock %+v off), %v after the write, found the record gone and sent instead of probing",
				trial, round, writer, wrote.Format("15:04:05.000000"), clocks[writer].ErrorAt(wrote), b.StateTTL(), ru.Format("15:04:05.000000"),
				p, truth().Format("15:04:05.000000"), c.ErrorAt(truth()), truth().Sub(wrote)))
			return nil
		default:
			return fmt.Errorf("worker %d decided %v at the end of the restraint", p, v.Decision)
		}
		writer, wrote = p, truth()
		if rng.IntN(2) == 0 {
			// The probe fails: the prober reopens the circuit.
			sleepToPhase(p)
			wrote = truth()
			if err := b.Failure(ctx, host); err != nil {
				return err
			}
		}
		// Otherwise the probe goes unanswered: its own write restrains
		// the host until another worker takes it over.
	}
	return nil
}

func (r *MarginResult) note(s string) {
	if len(r.Examples) < 3 {
		r.Examples = append(r.Examples, s)
	}
}
