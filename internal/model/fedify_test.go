package model

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/machine"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

const (
	sec = time.Second
	mn  = time.Minute
)

// call is one step of a scripted stream against one host.
type call struct {
	op        string // "allow", "fail", "ok"
	at        time.Duration
	heldSince time.Duration      // allow: freshMsg for a fresh message
	want      kvbreaker.Decision // allow
	retry     time.Duration      // allow + hold: want RetryAt
	label     string             // want Transition.String()
}

// freshMsg marks a message that has not been held.
const freshMsg = time.Duration(math.MinInt64)

func fresh(d time.Duration, want kvbreaker.Decision, retry time.Duration, label string) call {
	return call{op: "allow", at: d, heldSince: freshMsg, want: want, retry: retry, label: label}
}

func held(d, since time.Duration, want kvbreaker.Decision, retry time.Duration, label string) call {
	return call{op: "allow", at: d, heldSince: since, want: want, retry: retry, label: label}
}

func fail(d time.Duration, label string) call { return call{op: "fail", at: d, label: label} }
func ok(d time.Duration, label string) call   { return call{op: "ok", at: d, label: label} }

// play runs calls against m and checks every answer.
func play(t *testing.T, m Model, calls []call) {
	t.Helper()
	for i, c := range calls {
		now := at(c.at)
		var tr Transition
		switch c.op {
		case "allow":
			var hs time.Time
			if c.heldSince != freshMsg {
				hs = at(c.heldSince)
			}
			var v Verdict
			v, tr = m.Allow("h", now, hs)
			if v.Decision != c.want {
				t.Fatalf("%s step %d (allow at %v): decision %v, want %v", m.Name(), i, c.at, v.Decision, c.want)
			}
			if c.want == kvbreaker.Hold && !v.RetryAt.Equal(at(c.retry)) {
				t.Fatalf("%s step %d (allow at %v): retry at %v, want %v", m.Name(), i, c.at, v.RetryAt.Sub(t0), c.retry)
			}
		case "fail":
			tr = m.Failure("h", now)
		case "ok":
			tr = m.Success("h", now)
		}
		if c.label != "" && tr.String() != c.label {
			t.Fatalf("%s step %d (%s at %v): transition %s, want %s", m.Name(), i, c.op, c.at, tr, c.label)
		}
	}
}

// trip fails a closed host five times, one second apart, from start.
func trip(start time.Duration) []call {
	var cs []call
	for i := range 5 {
		d := start + time.Duration(i)*sec
		cs = append(cs, fresh(d, kvbreaker.Send, 0, "none"))
		label := "none"
		if i == 4 {
			label = "closed→open"
		}
		cs = append(cs, fail(d, label))
	}
	return cs
}

// fedifyCases are fedify's circuit-breaker.ts behaviours, one per case;
// with default options (threshold 5, window 10 min, recovery 30 min,
// release 1 s, held TTL 7 days).
var fedifyCases = []struct {
	name  string
	calls []call
}{
	{"closed-sends", []call{fresh(0, kvbreaker.Send, 0, "none"), fail(0, "none"), fresh(sec, kvbreaker.Send, 0, "none")}},
	{"threshold-in-window-opens", trip(0)},
	{"failures-outside-window-do-not-trip", []call{
		fail(0, "none"), fail(mn, "none"), fail(2*mn, "none"), fail(3*mn, "none"),
		fail(10*mn+sec, "none"), // the first has aged out: four in the window
		fresh(10*mn+2*sec, kvbreaker.Send, 0, "none"),
		fail(10*mn+3*sec, "closed→open"),
	}},
	{"open-holds-until-opened-plus-recovery", append(trip(0),
		fresh(5*sec, kvbreaker.Hold, 4*sec+30*mn, "none"),
		held(20*mn, 5*sec, kvbreaker.Hold, 4*sec+30*mn, "none"))},
	{"open-ignores-failures", append(trip(0),
		fail(10*sec, "none"), // a send decided before the circuit opened
		fresh(30*mn+4*sec-time.Millisecond, kvbreaker.Hold, 30*mn+4*sec, "none"))},
	{"probe-after-recovery-delay", append(trip(0),
		fresh(30*mn+4*sec, kvbreaker.Probe, 0, "open→half-open"))},
	{"half-open-holds-every-release-interval", append(trip(0),
		fresh(30*mn+4*sec, kvbreaker.Probe, 0, "open→half-open"),
		fresh(30*mn+5*sec, kvbreaker.Hold, 30*mn+6*sec, "none"),
		held(30*mn+6*sec, 30*mn+5*sec, kvbreaker.Hold, 30*mn+7*sec, "none"))},
	{"half-open-hold-capped-at-stale-instant", append(trip(0),
		fresh(30*mn+4*sec, kvbreaker.Probe, 0, "open→half-open"),
		fresh(60*mn+4*sec-500*time.Millisecond, kvbreaker.Hold, 60*mn+4*sec, "none"))},
	{"stale-probe-taken-over-without-label", append(trip(0),
		fresh(30*mn+4*sec, kvbreaker.Probe, 0, "open→half-open"),
		fresh(60*mn+4*sec, kvbreaker.Probe, 0, "none"),
		fresh(60*mn+5*sec, kvbreaker.Hold, 60*mn+6*sec, "none"))},
	{"half-open-strike-reopens", append(trip(0),
		fresh(30*mn+4*sec, kvbreaker.Probe, 0, "open→half-open"),
		fail(30*mn+9*sec, "half-open→open"),
		fresh(30*mn+10*sec, kvbreaker.Hold, 60*mn+9*sec, "none"))},
	{"probe-success-closes", append(trip(0),
		fresh(30*mn+4*sec, kvbreaker.Probe, 0, "open→half-open"),
		ok(30*mn+5*sec, "half-open→closed"),
		fresh(30*mn+6*sec, kvbreaker.Send, 0, "none"))},
	{"success-while-open-closes", append(trip(0), ok(mn, "open→closed"), fresh(mn, kvbreaker.Send, 0, "none"))},
	{"success-without-record-is-silent", []call{ok(0, "none"), fail(sec, "none"), ok(2*sec, "none")}},
	{"hold-retry-capped-at-drop-instant", append(trip(0),
		held(mn, -7*24*time.Hour+2*mn, kvbreaker.Hold, 2*mn, "none"))},
	{"drop-at-held-activity-ttl", append(trip(0),
		held(mn, -7*24*time.Hour+mn, kvbreaker.Drop, 0, "none"))},
	{"drop-even-when-closed", []call{held(7*24*time.Hour, 0, kvbreaker.Drop, 0, "none")}},
}

func TestFedify(t *testing.T) {
	for _, tc := range fedifyCases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := NewFedify(FedifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			play(t, f, tc.calls)
		})
	}
}

// TestKvbreakerFollowsFedifyCases plays fedify's cases against core: every
// decision, retry instant and label must be the same.
func TestKvbreakerFollowsFedifyCases(t *testing.T) {
	for _, tc := range fedifyCases {
		t.Run(tc.name, func(t *testing.T) {
			var now time.Time
			k, err := NewKvbreaker(kvbreaker.Settings{}, func() time.Time { return now })
			if err != nil {
				t.Fatal(err)
			}
			play(t, clocked{k, &now}, tc.calls)
			if k.Err() != nil {
				t.Fatal(k.Err())
			}
		})
	}
}

// clocked sets the Kvbreaker's clock to the instant of each call.
type clocked struct {
	*Kvbreaker
	now *time.Time
}

func (c clocked) Allow(h string, now, hs time.Time) (Verdict, Transition) {
	*c.now = now
	return c.Kvbreaker.Allow(h, now, hs)
}

func (c clocked) Failure(h string, now time.Time) Transition {
	*c.now = now
	return c.Kvbreaker.Failure(h, now)
}

func (c clocked) Success(h string, now time.Time) Transition {
	*c.now = now
	return c.Kvbreaker.Success(h, now)
}

func (c clocked) Live(h string, now time.Time) bool {
	*c.now = now
	return c.Kvbreaker.Live(h, now)
}

func TestFedifyOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		o       FedifyOptions
		wantTTL time.Duration
		wantErr string
	}{
		{"default-ttl-covers-held-activities", FedifyOptions{}, 30*mn + 7*24*time.Hour, ""},
		{"default-ttl-uses-window-when-longer", FedifyOptions{HeldActivityTTL: mn, FailureWindow: time.Hour}, 90 * mn, ""},
		{"custom-policy-ttl", FedifyOptions{Failure: func([]time.Time) bool { return true }}, 30*mn + 7*24*time.Hour, ""},
		{"explicit-ttl-at-recovery-delay", FedifyOptions{StateTTL: 30 * mn}, 30 * mn, ""},
		// fedify 2.3.3 and later: normalizeCircuitBreakerOptions throws,
		// so the model refuses it too.
		{"short-ttl-refused", FedifyOptions{StateTTL: 10 * mn}, 0, "stateTtl must be at least recoveryDelay"},
		{"negative-duration", FedifyOptions{RecoveryDelay: -1}, 0, "recoveryDelay must be a positive duration"},
		{"negative-threshold", FedifyOptions{FailureThreshold: -1}, 0, "failureThreshold must be a positive integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewFedifyConfig(tc.o)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.StateTTL != tc.wantTTL {
				t.Fatalf("StateTTL = %v, want %v", c.StateTTL, tc.wantTTL)
			}
		})
	}
}

func TestFedifyCustomPolicyHistory(t *testing.T) {
	var seen int
	f, err := NewFedify(FedifyOptions{Failure: func(ts []time.Time) bool { seen = len(ts); return false }})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 150 {
		f.Failure("h", at(time.Duration(i)*time.Hour)) // never pruned by time
	}
	if seen != maxCustomFailureHistory {
		t.Fatalf("policy saw %d failures, want the newest %d", seen, maxCustomFailureHistory)
	}
}

func TestFedifyRecordExpires(t *testing.T) {
	f, err := NewFedify(FedifyOptions{}, WithMaxStoreTTL(10*mn))
	if err != nil {
		t.Fatal(err)
	}
	play(t, f, append(trip(0),
		fresh(10*mn+4*sec-time.Millisecond, kvbreaker.Hold, 30*mn+4*sec, "none"),
		fresh(10*mn+4*sec, kvbreaker.Send, 0, "none"), // the open record is gone: closed
	))
	if f.Live("h", at(10*mn+4*sec)) {
		t.Fatal("record still live after its TTL")
	}
}

// TestStoreTTLBelowRestraintGap: the failure mode the design note warns
// about, a store TTL (10 min) below the restraint (30 min). fedify 2.3.3+
// refuses such a stateTtl, so the store expires the record on its own
// (WithMaxStoreTTL): the open record is gone after 10 minutes and the model
// sends to the dead host in the gap until it re-trips, twice per recovery
// delay; with the store keeping the record it holds throughout. kvbreaker
// refuses the StateTTL. The gap is the store's doing, not a stateTtl the
// model would accept: only WithMaxStoreTTL produces it.
func TestStoreTTLBelowRestraintGap(t *testing.T) {
	gapSends := func(opts ...Option) int {
		f, err := NewFedify(FedifyOptions{}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		play(t, f, trip(0)) // opens at 4 s: restrained until 30m4s
		n := 0
		for d := mn; d <= 30*mn; d += mn { // a message a minute, the host still dead
			if v, _ := f.Allow("h", at(d), time.Time{}); v.Decision == kvbreaker.Send {
				n++
				f.Failure("h", at(d))
			}
		}
		return n
	}
	short, def := gapSends(WithMaxStoreTTL(10*mn)), gapSends()
	t.Logf("sends to the dead host inside its 30-minute restraint: %d with a 10m store TTL, %d with the default", short, def)
	// Gone at 10m4s: sends at 11..15 min re-trip it; gone again at 25 min:
	// sends at 25..29 min.
	if short != 10 || def != 0 {
		t.Fatalf("gap sends: store TTL 10m %d (want 10), default %d (want 0)", short, def)
	}
	if _, err := NewFedify(FedifyOptions{StateTTL: 10 * mn}); err == nil || !strings.Contains(err.Error(), "stateTtl must be at least recoveryDelay") {
		t.Fatalf("fedify model with stateTtl 10m < recoveryDelay 30m: err = %v", err)
	}
	_, err := machine.NewConfig(machine.Config{StateTTL: 10 * mn}, driver.Traits{Atomic: true})
	if err == nil || !strings.Contains(err.Error(), "StateTTL is 10m0s") {
		t.Fatalf("machine.NewConfig with StateTTL 10m < RecoveryDelay 30m: err = %v", err)
	}
	var now time.Time
	if _, err := NewKvbreaker(kvbreaker.Settings{StateTTL: 10 * mn}, func() time.Time { return now }); err == nil {
		t.Fatal("kvbreaker model accepted StateTTL 10m")
	}
}
