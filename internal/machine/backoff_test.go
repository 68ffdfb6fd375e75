package machine

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

// trip opens rec with FailureThreshold failures ending at now.
func trip(t *testing.T, c *Config, rec record.Record, now time.Time) record.Record {
	t.Helper()
	for i := range c.FailureThreshold {
		st := FailureStep(rec, now.Add(time.Duration(i-c.FailureThreshold+1)*time.Millisecond), c)
		rec = st.Record
	}
	if rec.State() != record.StateOpen {
		t.Fatalf("not open after %d failures: %+v", c.FailureThreshold, rec)
	}
	return rec
}

// probeFails elects a probe at rec's restraint's end and fails it there.
func probeFails(t *testing.T, c *Config, rec record.Record) (record.Record, time.Time) {
	t.Helper()
	now := rec.RestrainedUntil
	st := AllowStep(rec, now, now.Add(-time.Minute), c)
	if st.Decision != Probe || st.Record.Backoff != rec.Backoff || !st.Record.Since.Equal(rec.Since) {
		t.Fatalf("at %v: %v with %+v; want a probe keeping back-off %d and since %v", now, st.Decision, st.Record, rec.Backoff, rec.Since)
	}
	st = FailureStep(st.Record, now, c)
	if st.To != record.StateOpen || st.Write != WritePut {
		t.Fatalf("failed probe: %v→%v write %v", st.From, st.To, st.Write)
	}
	return st.Record, now
}

// TestBackoffLengthensRestraint: each failed probe multiplies the restraint
// up to the cap, where the level stops counting; a success resets it.
func TestBackoffLengthensRestraint(t *testing.T) {
	c := testConfig(t, Config{RecoveryDelay: 30 * time.Second, MaxRecoveryDelay: 2 * time.Minute})
	if c.RecoveryMultiplier != DefaultRecoveryMultiplier {
		t.Fatalf("multiplier %v, want the default %v", c.RecoveryMultiplier, DefaultRecoveryMultiplier)
	}
	rec := trip(t, c, record.Record{}, at(0))
	if got := rec.RestrainedUntil.Sub(at(0)); got != 30*time.Second || rec.Backoff != 0 {
		t.Fatalf("first restraint %v at level %d, want 30s at 0", got, rec.Backoff)
	}
	for i, want := range []struct {
		level int
		d     time.Duration
	}{{1, time.Minute}, {2, 2 * time.Minute}, {2, 2 * time.Minute}, {2, 2 * time.Minute}} {
		var now time.Time
		rec, now = probeFails(t, c, rec)
		if got := rec.RestrainedUntil.Sub(now); got != want.d || rec.Backoff != want.level {
			t.Fatalf("after failed probe %d: restraint %v at level %d, want %v at %d", i+1, got, rec.Backoff, want.d, want.level)
		}
		// Held messages wait for the whole restraint.
		if st := AllowStep(rec, now.Add(want.d-time.Millisecond), time.Time{}, c); st.Decision != Hold || !st.RetryAt.Equal(rec.RestrainedUntil) {
			t.Fatalf("within the restraint: %v until %v", st.Decision, st.RetryAt)
		}
	}
	st := AllowStep(rec, rec.RestrainedUntil, time.Time{}, c)
	if st.Decision != Probe {
		t.Fatalf("at the restraint's end: %v", st.Decision)
	}
	now := rec.RestrainedUntil
	if st = SuccessStep(st.Record, now, c); st.Write != WriteDelete {
		t.Fatalf("success without a paced release: write %v, want delete", st.Write)
	}
	// The next outage starts from RecoveryDelay again.
	rec = trip(t, c, record.Record{}, now.Add(time.Hour))
	if got := rec.RestrainedUntil.Sub(now.Add(time.Hour)); got != 30*time.Second || rec.Backoff != 0 {
		t.Fatalf("after a success: restraint %v at level %d, want 30s at 0", got, rec.Backoff)
	}
}

// TestBackoffOffWritesNoNewField: without the options, a failed probe
// reopens for RecoveryDelay and the record keeps the format older releases
// read; a level left by a back-off configuration is forgotten.
func TestBackoffOffWritesNoNewField(t *testing.T) {
	c := testConfig(t, Config{})
	rec := trip(t, c, record.Record{}, at(0))
	rec.Backoff, rec.Since = 3, at(-time.Hour) // written by a fleet with the options on
	now := rec.RestrainedUntil
	st := AllowStep(rec, now, time.Time{}, c)
	if st.Decision != Probe || st.Record.Backoff != 0 || !st.Record.Since.IsZero() {
		t.Fatalf("probe claim without the options: %v %+v", st.Decision, st.Record)
	}
	rec = FailureStep(st.Record, now, c).Record
	if rec.RestrainedUntil.Sub(now) != c.RecoveryDelay || rec.Backoff != 0 || !rec.Since.IsZero() {
		t.Fatalf("back-off off: %+v", rec)
	}
	if flags := record.EncodeRecord(rec)[1]; flags&^3 != 0 {
		t.Fatalf("flags %#x: a field older releases cannot read was written", flags)
	}
}

func TestRestraint(t *testing.T) {
	c := testConfig(t, Config{RecoveryDelay: time.Minute, MaxRecoveryDelay: time.Hour, RecoveryMultiplier: 1.5})
	prev := time.Duration(0)
	level := 0
	for ; c.Restraint(level) < time.Hour; level++ {
		d := c.Restraint(level)
		want := time.Duration(float64(time.Minute) * math.Pow(1.5, float64(level)))
		if d != want || d <= prev {
			t.Fatalf("Restraint(%d) = %v, want %v, above %v", level, d, want, prev)
		}
		prev = d
	}
	if level != c.backoffCap || c.nextLevel(level) != level || c.nextLevel(level-1) != level {
		t.Fatalf("cap reached at level %d, backoffCap %d, nextLevel %d", level, c.backoffCap, c.nextLevel(level))
	}
	if c.Restraint(level+100) != time.Hour || c.Restraint(-1) != time.Minute {
		t.Fatalf("Restraint past the cap %v, below zero %v", c.Restraint(level+100), c.Restraint(-1))
	}
	off := testConfig(t, Config{})
	if off.Restraint(5) != off.RecoveryDelay || off.nextLevel(5) != 0 {
		t.Fatalf("without back-off: Restraint(5) = %v, nextLevel(5) = %d", off.Restraint(5), off.nextLevel(5))
	}
}

func TestBackoffConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Config
		want string // "" to accept
	}{
		{name: "negative cap", s: Config{MaxRecoveryDelay: -1}, want: "MaxRecoveryDelay is -1ns: set the longest restraint"},
		{name: "multiplier without cap", s: Config{RecoveryMultiplier: 2}, want: "RecoveryMultiplier is 2 but MaxRecoveryDelay is zero"},
		{name: "cap below delay", s: Config{MaxRecoveryDelay: time.Minute}, want: "MaxRecoveryDelay is 1m0s, below RecoveryDelay 30m0s"},
		{name: "cap of 1ns", s: Config{MaxRecoveryDelay: 1}, want: "MaxRecoveryDelay is 1ns, below RecoveryDelay 30m0s"},
		{name: "cap at delay", s: Config{MaxRecoveryDelay: 30 * time.Minute}},
		{name: "cap 1ns above delay", s: Config{RecoveryDelay: time.Second, MaxRecoveryDelay: time.Second + 1}},
		{name: "multiplier one", s: Config{MaxRecoveryDelay: time.Hour, RecoveryMultiplier: 1}, want: "RecoveryMultiplier is 1: set a factor above 1"},
		{name: "multiplier NaN", s: Config{MaxRecoveryDelay: time.Hour, RecoveryMultiplier: math.NaN()}, want: "RecoveryMultiplier is NaN: set a factor above 1"},
		{name: "multiplier infinite", s: Config{MaxRecoveryDelay: time.Hour, RecoveryMultiplier: math.Inf(1)}, want: "RecoveryMultiplier is +Inf: set a factor above 1"},
		{name: "multiplier too close to one", s: Config{MaxRecoveryDelay: 1000 * time.Hour, RecoveryMultiplier: 1.0001}, want: "would take more than 1024 failed probes"},
		{name: "negative ramp", s: Config{ReleaseRamp: -time.Second}, want: "ReleaseRamp is -1s: set how long"},
		{name: "state TTL below cap", s: Config{MaxRecoveryDelay: 2 * time.Hour, StateTTL: time.Hour}, want: "StateTTL is 1h0m0s, below 2h0m2.001s (max(RecoveryDelay, MaxRecoveryDelay, FailureWindow, ReleaseRamp)"},
		{name: "state TTL below ramp", s: Config{ReleaseRamp: 3 * time.Hour, StateTTL: 2 * time.Hour}, want: "StateTTL is 2h0m0s, below 3h0m2.001s"},
		{name: "custom policy TTL below cap", s: Config{MaxRecoveryDelay: 2 * time.Hour, StateTTL: time.Hour, FailurePolicy: func([]time.Time) bool { return false }}, want: "below 2h0m2.001s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewConfig(tc.s, driver.Traits{Atomic: true})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			case err == nil:
				again, err := NewConfig(c, driver.Traits{Atomic: true})
				if err != nil || again.MaxRecoveryDelay != c.MaxRecoveryDelay || again.RecoveryMultiplier != c.RecoveryMultiplier || again.backoffCap != c.backoffCap {
					t.Fatalf("normalised config not accepted unchanged: %+v, %v", again, err)
				}
			}
		})
	}
	// A cap equal to a 1ns RecoveryDelay is back-off on, at its one level.
	if c := testConfig(t, Config{RecoveryDelay: 1, MaxRecoveryDelay: 1, StateTTL: time.Hour}); c.MaxRecoveryDelay != 1 || c.RecoveryMultiplier != DefaultRecoveryMultiplier {
		t.Fatalf("RecoveryDelay = MaxRecoveryDelay = 1ns normalised to %v, ×%v", c.MaxRecoveryDelay, c.RecoveryMultiplier)
	}
	// The derived TTL covers the longest restraint and the ramp.
	c := testConfig(t, Config{MaxRecoveryDelay: 2 * time.Hour})
	if want := 2*time.Hour + DefaultTTLMargin; c.StateTTL != want {
		t.Fatalf("StateTTL %v, want %v", c.StateTTL, want)
	}
	c = testConfig(t, Config{ReleaseRamp: 3 * time.Hour})
	if want := 3*time.Hour + DefaultTTLMargin; c.StateTTL != want {
		t.Fatalf("StateTTL %v, want %v", c.StateTTL, want)
	}
}

// TestFutureWithBackoff: a restraint at the cap is what a correct writer
// wrote; one past it by more than the skew bound is reanchored, keeping its
// level.
func TestFutureWithBackoff(t *testing.T) {
	c := testConfig(t, Config{RecoveryDelay: time.Minute, MaxRecoveryDelay: time.Hour})
	rec := record.Record{Failures: failures(0), RestrainedUntil: at(time.Hour), Backoff: c.backoffCap}
	if c.Future(rec, at(0)) {
		t.Fatal("a restraint of MaxRecoveryDelay at the cap's level reads as from the future")
	}
	rec.Backoff = 1
	if !c.Future(rec, at(0)) {
		t.Fatal("an hour's restraint at level 1 (2 min) is not from the future")
	}
	st := AllowStep(rec, at(0), time.Time{}, c)
	if st.Write != WritePut || !st.Record.RestrainedUntil.Equal(at(2*time.Minute)) || st.Record.Backoff != 1 {
		t.Fatalf("reanchored to %+v, want restrained until +2m at level 1", st.Record)
	}
}

func TestAbandonKeepsBackoff(t *testing.T) {
	rec := record.Record{Failures: failures(0), RestrainedUntil: at(time.Hour), Probing: true, Backoff: 2, Since: at(-time.Hour)}
	st := AbandonStep(rec, at(time.Hour), at(time.Minute))
	if st.Write != WritePut || st.Record.Backoff != 2 || !st.Record.Since.Equal(at(-time.Hour)) || st.Record.Probing {
		t.Fatalf("abandoned: %+v", st.Record)
	}
}

// TestPacedRelease: after a successful probe, held messages come back in
// the order they were held, over twice the outage (capped by ReleaseRamp),
// while fresh messages go at once; the closed record lives until the ramp
// ends.
func TestPacedRelease(t *testing.T) {
	c := testConfig(t, Config{RecoveryDelay: time.Minute, ReleaseRamp: time.Hour})
	s := at(0)
	rec := trip(t, c, record.Record{}, s)
	if !rec.Since.Equal(s) {
		t.Fatalf("since %v, want the trip %v", rec.Since, s)
	}
	for rec.RestrainedUntil.Before(at(20 * time.Minute)) {
		rec, _ = probeFails(t, c, rec)
	}
	tr := rec.RestrainedUntil
	st := AllowStep(rec, tr, s.Add(time.Second), c)
	if st.Decision != Probe {
		t.Fatalf("at %v: %v", tr, st.Decision)
	}
	st = SuccessStep(st.Record, tr, c)
	if st.Write != WritePut || !st.Record.Since.Equal(s) || !st.Record.Released.Equal(tr) || st.Record.State() != record.StateClosed ||
		len(st.Record.Failures) != 0 || st.Record.Backoff != 0 {
		t.Fatalf("success: write %v of %+v; want the closed ramp record", st.Write, st.Record)
	}
	rec = st.Record
	outage := tr.Sub(s)
	ramp := 2 * outage
	if fresh := AllowStep(rec, tr, time.Time{}, c); fresh.Decision != Send {
		t.Fatalf("fresh message during the ramp: %v", fresh.Decision)
	}
	prev := tr
	for _, frac := range []float64{0, 0.25, 0.5, 0.75, 1} {
		held := s.Add(time.Duration(frac * float64(outage)))
		want := tr.Add(time.Duration(frac * float64(ramp)))
		if got := c.ReleaseAt(rec, held); got.Sub(want).Abs() > time.Millisecond || got.Before(prev) {
			t.Fatalf("held at %.2f of the outage: released at %v, want %v, not before %v", frac, got, want, prev)
		}
		prev = c.ReleaseAt(rec, held)
		if frac > 0 {
			st := AllowStep(rec, tr, held, c)
			if st.Decision != Hold || !st.RetryAt.Equal(prev) {
				t.Fatalf("held at %.2f, asking at the release: %v until %v, want hold until %v", frac, st.Decision, st.RetryAt, prev)
			}
		}
		if st := AllowStep(rec, prev, held, c); st.Decision != Send {
			t.Fatalf("held at %.2f, asking at its turn: %v", frac, st.Decision)
		}
	}
	if got := c.ReleaseAt(rec, s.Add(-time.Hour)); !got.Equal(tr) {
		t.Fatalf("held before the outage: %v, want %v", got, tr)
	}
	// The hold limit still wins.
	c2 := *c
	c2.HoldLimit = time.Minute
	if st := AllowStep(rec, tr, tr.Add(-30*time.Second), &c2); !st.RetryAt.Equal(tr.Add(30 * time.Second)) {
		t.Fatalf("retry %v past the hold limit", st.RetryAt)
	}
	// A success or a failure during the ramp keeps it; after it the record goes.
	if st := SuccessStep(rec, tr.Add(time.Minute), c); st.Write != WriteNone {
		t.Fatalf("success during the ramp: write %v", st.Write)
	}
	f := FailureStep(rec, tr.Add(time.Minute), c)
	if !f.Record.Released.Equal(tr) || !f.Record.Since.Equal(s) || len(f.Record.Failures) != 1 {
		t.Fatalf("failure during the ramp: %+v", f.Record)
	}
	if st := SuccessStep(f.Record, tr.Add(2*time.Minute), c); st.Write != WritePut || len(st.Record.Failures) != 0 || !st.Record.Released.Equal(tr) {
		t.Fatalf("success after a failure during the ramp: write %v of %+v", st.Write, st.Record)
	}
	end := tr.Add(ramp)
	if st := SuccessStep(f.Record, end, c); st.Write != WriteDelete {
		t.Fatalf("success at the ramp's end: write %v", st.Write)
	}
	if st := FailureStep(rec, end, c); !st.Record.Released.IsZero() || !st.Record.Since.IsZero() {
		t.Fatalf("failure after the ramp kept it: %+v", st.Record)
	}
	// A trip during the ramp starts a new outage.
	re := trip(t, c, rec, tr.Add(time.Minute))
	if !re.Since.Equal(tr.Add(time.Minute)) || !re.Released.IsZero() {
		t.Fatalf("new outage during the ramp: %+v", re)
	}
	// Without the option the same record releases everything at once.
	off := testConfig(t, Config{RecoveryDelay: time.Minute})
	if st := AllowStep(rec, tr, s.Add(outage/2), off); st.Decision != Send {
		t.Fatalf("ramp off: %v", st.Decision)
	}
}

// TestRampLength: twice the outage, at most ReleaseRamp.
func TestRampLength(t *testing.T) {
	c := testConfig(t, Config{ReleaseRamp: time.Hour})
	for _, tc := range []struct{ span, want time.Duration }{
		{0, 0}, {-time.Second, 0}, {time.Minute, 2 * time.Minute}, {30 * time.Minute, time.Hour}, {30*time.Minute + 1, time.Hour}, {5 * time.Hour, time.Hour},
	} {
		if got := c.ramp(tc.span); got != tc.want {
			t.Errorf("ramp(%v) = %v, want %v", tc.span, got, tc.want)
		}
	}
	rec := record.Record{Since: at(0), Released: at(0)}
	if got := c.ReleaseAt(rec, at(time.Minute)); !got.Equal(at(0)) {
		t.Fatalf("no outage: %v", got)
	}
}

// TestReleaseAtWholeMilliseconds: a turn is on the millisecond grid the
// Breaker's clock is truncated to, never before the exact spread instant;
// otherwise a message asked again at its turn would be held again, to an
// instant already past.
func TestReleaseAtWholeMilliseconds(t *testing.T) {
	c := testConfig(t, Config{ReleaseRamp: time.Hour})
	rec := record.Record{Since: at(0), Released: at(7 * time.Minute)}
	for i := range 1000 {
		held := at(time.Duration(i) * 419 * time.Millisecond)
		got := c.ReleaseAt(rec, held)
		exact := float64(held.Sub(rec.Since)) / float64(7*time.Minute) * float64(14*time.Minute)
		if got.Sub(rec.Released) < time.Duration(exact) || got.Sub(rec.Released) > time.Duration(exact)+time.Millisecond || got.Nanosecond()%int(time.Millisecond) != 0 {
			t.Fatalf("held at %v: released at %v, want a millisecond at or just after +%v", held, got, time.Duration(exact))
		}
		if st := AllowStep(rec, got, held, c); st.Decision != Send {
			t.Fatalf("held at %v, asking at its turn %v: %v until %v", held, got, st.Decision, st.RetryAt)
		}
	}
}
