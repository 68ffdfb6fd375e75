package model

import (
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
