package model

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
)

// trip2 is trip with the labels two fields can give.

// twoFieldCases follow the note's pseudocode line by line (defaults: threshold
// 5, window 10 min, recovery 30 min, margin 5 s).
var twoFieldCases = []struct {
	name  string
	calls []call
}{
	{"closed-sends", []call{fresh(0, kvbreaker.Send, 0, "none"), fail(0, "none"), fresh(sec, kvbreaker.Send, 0, "none")}},
	{"tripped-opens", trip(0)},
	{"hold-retries-at-restrained-until", append(trip(0), fresh(mn, kvbreaker.Hold, 30*mn+4*sec, "none"))},
	{"probe-has-no-label", append(trip(0), fresh(30*mn+4*sec, kvbreaker.Probe, 0, "none"))},
	// Cost (b): a probe in flight is just "restrained", so held messages
	// wait for restrainedUntil, not the release interval.
	{"half-open-hold-waits-for-restraint", append(trip(0),
		fresh(30*mn+4*sec, kvbreaker.Probe, 0, "none"),
		fresh(30*mn+5*sec, kvbreaker.Hold, 60*mn+4*sec, "none"))},
	// Cost (a): the strike cannot be told from a failure while open.
	{"strike-has-no-label", append(trip(0),
		fresh(30*mn+4*sec, kvbreaker.Probe, 0, "none"),
		fail(30*mn+6*sec, "none"),
		fresh(30*mn+7*sec, kvbreaker.Hold, 60*mn+6*sec, "none"))},
	// The race difference: a late failure re-arms the restraint, where
	// fedify's open circuit ignores it.
	{"failure-while-restrained-re-arms", append(trip(0),
		fail(10*sec, "none"),
		fresh(30*mn+4*sec, kvbreaker.Hold, 30*mn+10*sec, "none"),
		fresh(30*mn+10*sec, kvbreaker.Probe, 0, "none"))},
	{"success-wipes", append(trip(0), ok(mn, "open→closed"), fresh(mn, kvbreaker.Send, 0, "none"))},
	{"success-without-record-is-silent", []call{ok(0, "none")}},
	{"drop-at-hold-limit", []call{held(7*24*time.Hour, 0, kvbreaker.Drop, 0, "none")}},
}

func TestTwoField(t *testing.T) {
	for _, tc := range twoFieldCases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewTwoField(TwoFieldConfig{})
			if err != nil {
				t.Fatal(err)
			}
			play(t, s, tc.calls)
		})
	}
}

func TestTwoFieldDerivedTTL(t *testing.T) {
	s, err := NewTwoField(TwoFieldConfig{})
	if err != nil {
		t.Fatal(err)
	}
	c := s.Config()
	if got, want := c.StateTTL(), 30*mn+5*sec; got != want {
		t.Fatalf("StateTTL = %v, want max(recoveryDelay, failureWindow) + ttlMargin = %v", got, want)
	}
	play(t, s, trip(0))
	if !s.Live("h", at(30*mn+9*sec-time.Millisecond)) || s.Live("h", at(30*mn+9*sec)) {
		t.Fatal("the open record must live exactly StateTTL after its last write (4 s)")
	}
	if _, err := NewTwoField(TwoFieldConfig{RecoveryDelay: -1}); err == nil {
		t.Fatal("negative recovery delay accepted")
	}
}

// TestIdleGapDemotesProbe pins a difference between fedify and both
// derived-TTL models that the note's "a record can influence a decision
// only within max(recoveryDelay, failureWindow) of its last write" misses:
// an open record still decides "probe" after recoveryDelay. When an open
// host gets no traffic until its record has expired (30m5s after the
// tripping failure), fedify (whose record lives 7 days) probes and reopens
// on the first failure, while two-field and kvbreaker see no record, send,
// and need FailureThreshold new failures to reopen: here 4 more deliveries
// to the dead host. DESIGN §2 accepts this as the cost of a derived TTL
// (losing the record turns the probe into a plain send).
func TestIdleGapDemotesProbe(t *testing.T) {
	var now time.Time
	k, err := NewKvbreaker(kvbreaker.Settings{}, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewTwoField(TwoFieldConfig{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFedify(FedifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sends := map[string]int{}
	for _, m := range []Model{f, s, clocked{k, &now}} {
		play(t, m, trip(0))
		// Idle until 31 minutes after the tripping failure, then a message
		// every 10 s to the still dead host until the model holds again.
		for d := 31 * mn; d < 40*mn; d += 10 * sec {
			v, _ := m.Allow("h", at(d), time.Time{})
			if v.Decision == kvbreaker.Hold {
				break
			}
			sends[m.Name()]++
			m.Failure("h", at(d))
		}
	}
	t.Logf("deliveries to the dead host after the idle gap: %v", sends)
	if sends["fedify-model"] != 1 || sends["two-field"] != 5 || sends["kvbreaker"] != 5 {
		t.Fatalf("sends after the idle gap = %v; want fedify 1 (a probe), the derived-TTL models 5 (re-accumulation)", sends)
	}
}

// TestTwoFieldBackoff: with recovery back-off each probe that fails in a
// row doubles the restraint (30m, 1h, then the 2h cap), a failure while
// restrained with no probe out re-arms without counting, and a success
// starts the next outage from recoveryDelay again.
func TestTwoFieldBackoff(t *testing.T) {
	s, err := NewTwoField(TwoFieldConfig{MaxRecoveryDelay: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if c := s.Config(); c.RecoveryMultiplier != 2 || c.StateTTL() != 2*time.Hour+5*sec {
		t.Fatalf("multiplier %v, StateTTL %v; want the default 2 and MaxRecoveryDelay + ttlMargin", c.RecoveryMultiplier, c.StateTTL())
	}
	calls := trip(0) // open at 4s until 30m4s
	ru := 30*mn + 4*sec
	for _, d := range []time.Duration{time.Hour, 2 * time.Hour, 2 * time.Hour} {
		calls = append(calls,
			fresh(ru, kvbreaker.Probe, 0, "none"),
			fresh(ru+sec, kvbreaker.Hold, ru+30*mn, "none"), // the claim lasts recoveryDelay
			fail(ru+sec, "none"),
			fresh(ru+2*sec, kvbreaker.Hold, ru+sec+d, "none"))
		ru += sec + d
	}
	// Not a probe's failure: re-armed for the cap, not counted (it could
	// not grow past the cap anyway; the next case checks the count).
	calls = append(calls, fail(ru-mn, "none"), fresh(ru-mn+sec, kvbreaker.Hold, ru-mn+2*time.Hour, "none"))
	ru += 2*time.Hour - mn
	calls = append(calls, fresh(ru, kvbreaker.Probe, 0, "none"), ok(ru, "open→closed"), fresh(ru, kvbreaker.Send, 0, "none"))
	calls = append(calls, trip(ru+mn)...)
	calls = append(calls, fresh(ru+mn+5*sec, kvbreaker.Hold, ru+mn+4*sec+30*mn, "none"))
	play(t, s, calls)

	// Two failures with no probe out re-arm at the same level.
	s, err = NewTwoField(TwoFieldConfig{MaxRecoveryDelay: 10 * time.Hour, RecoveryMultiplier: 3})
	if err != nil {
		t.Fatal(err)
	}
	calls = append(trip(0),
		fail(mn, "none"), fail(2*mn, "none"),
		fresh(3*mn, kvbreaker.Hold, 32*mn, "none"),
		fresh(32*mn, kvbreaker.Probe, 0, "none"), fail(33*mn, "none"),
		fresh(34*mn, kvbreaker.Hold, 33*mn+90*mn, "none"))
	play(t, s, calls)
}

func TestTwoFieldBackoffConfig(t *testing.T) {
	for _, tc := range []struct {
		c    TwoFieldConfig
		want string // "" to accept
	}{
		{TwoFieldConfig{MaxRecoveryDelay: -1}, "negative setting"},
		{TwoFieldConfig{RecoveryMultiplier: 2}, "RecoveryMultiplier is 2 but MaxRecoveryDelay is zero"},
		{TwoFieldConfig{MaxRecoveryDelay: time.Minute}, "MaxRecoveryDelay is 1m0s, below RecoveryDelay 30m0s"},
		{TwoFieldConfig{MaxRecoveryDelay: 30 * mn}, ""},
		{TwoFieldConfig{MaxRecoveryDelay: time.Hour, RecoveryMultiplier: 1}, "RecoveryMultiplier is 1: set a factor above 1"},
		{TwoFieldConfig{MaxRecoveryDelay: time.Hour, RecoveryMultiplier: math.NaN()}, "RecoveryMultiplier is NaN"},
		{TwoFieldConfig{MaxRecoveryDelay: time.Hour, RecoveryMultiplier: math.Inf(1)}, "RecoveryMultiplier is +Inf"},
		{TwoFieldConfig{MaxRecoveryDelay: time.Hour, RecoveryMultiplier: 1.5}, ""},
	} {
		_, err := NewTwoField(tc.c)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.c, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: error %v, want one with %q", tc.c, err, tc.want)
		}
	}
}
