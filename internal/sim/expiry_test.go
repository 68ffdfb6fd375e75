package sim

import (
	"testing"
	"time"
)

const sec, mn = time.Second, time.Minute

func allow(at time.Duration, host string) Call { return Call{At: at, Host: host, Kind: CallAllow} }
func failure(at time.Duration, host string) Call {
	return Call{At: at, Host: host, Kind: CallFailure}
}
func success(at time.Duration, host string) Call {
	return Call{At: at, Host: host, Kind: CallSuccess}
}

// trip opens host's circuit with n failures, one a second from start: the
// last one at start + (n-1) s opens it.
func trip(host string, start time.Duration, n int) []Call {
	var cs []Call
	for i := range n {
		cs = append(cs, allow(start+time.Duration(i)*sec, host), failure(start+time.Duration(i)*sec, host))
	}
	return cs
}

func cat(parts ...[]Call) []Call {
	var out []Call
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func replay(t *testing.T, o Options, storeTTL time.Duration, calls []Call) map[string]ModelReport {
	t.Helper()
	reps, err := Replay(o, storeTTL, calls)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]ModelReport{}
	for _, r := range reps {
		if r.Refused != "" {
			t.Fatalf("%s refused: %s", r.Model, r.Refused)
		}
		out[r.Model] = r
	}
	return out
}

// TestExpiryEffectsCounted checks each expiry count on a constructed call
// stream, against what fedify's record (kept 7 days) and a derived-TTL
// record (max(RecoveryDelay, FailureWindow) + 5 s) do with it. Defaults:
// threshold 5, window 10 min, recovery delay 30 min. The negative control
// is a stream where every host is asked again in time: every count must be
// zero for every model.
//
// Each effect has its own count: "records lost" alone (a send where the
// reference restrained) hides silent closes, late failures counted as
// closed, and the reopens they cause.
func TestExpiryEffectsCounted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		o        Options
		storeTTL time.Duration
		calls    []Call
		want     map[string]ExpiryEffects // models not listed: all zero
		// labels: the model reports fewer state changes than the reference
		// (a silent close it never reports).
		labels map[string]int
	}{{
		// Opened at 4 s, restrained until 30m4s, asked at 30m4s: probe;
		// the probe fails (one-strike reopen), the next probe succeeds.
		// A late failure at 10 min lands on the open record (ignored).
		name: "negative-control-asked-in-time",
		calls: cat(trip("h", 0, 5), []Call{failure(10*mn, "h"),
			allow(30*mn+4*sec, "h"), failure(30*mn+5*sec, "h"),
			allow(60*mn+5*sec, "h"), success(60*mn+6*sec, "h")}),
	}, {
		// Nobody asks before 31 min: the derived-TTL record expired at
		// 30m9s. fedify probes and reopens on one failure; the derived
		// models send, then count 5 failures afresh before reopening.
		name: "idle-gap-send-instead-of-probe",
		calls: cat(trip("h", 0, 5), []Call{allow(31*mn, "h"), failure(31*mn+sec, "h"),
			failure(31*mn+2*sec, "h"), failure(31*mn+3*sec, "h"), failure(31*mn+4*sec, "h"), failure(31*mn+5*sec, "h"),
			allow(31*mn+6*sec, "h")}),
		want: map[string]ExpiryEffects{
			"two-field": {SilentCloses: 1, SendsInsteadOfProbe: 1, LateFailuresCountedClosed: 5, ReopensAfterExpiry: 1},
			"kvbreaker": {SilentCloses: 1, SendsInsteadOfProbe: 1, LateFailuresCountedClosed: 5, ReopensAfterExpiry: 1},
		},
	}, {
		// Late failures after expiry, threshold 2: opened at 1 s, the
		// derived record expires at 30m6s; two late failures (sends
		// decided before the open) arrive at 30m10s and 30m11s. fedify
		// ignores both and probes at 30m12s; the derived models count them
		// as closed failures, reopen (closed→open, reported) and hold.
		name: "late-failures-reopen",
		o:    Options{FailureThreshold: 2},
		calls: cat(trip("h", 0, 2), []Call{failure(30*mn+10*sec, "h"), failure(30*mn+11*sec, "h"),
			allow(30*mn+12*sec, "h")}),
		want: map[string]ExpiryEffects{
			"two-field": {SilentCloses: 1, LateFailuresCountedClosed: 2, ReopensAfterExpiry: 1},
			"kvbreaker": {SilentCloses: 1, LateFailuresCountedClosed: 2, ReopensAfterExpiry: 1},
		},
	}, {
		// The host answers at 40 min, after the derived record expired:
		// fedify reports open→closed, the derived models nothing (the
		// close already happened, silently, at 30m9s).
		name:   "silent-close",
		calls:  cat(trip("h", 0, 5), []Call{success(40*mn, "h")}),
		want:   map[string]ExpiryEffects{"two-field": {SilentCloses: 1}, "kvbreaker": {SilentCloses: 1}},
		labels: map[string]int{"two-field": 1, "kvbreaker": 1},
	}, {
		// Every store keeps records 10 min: inside the 30-minute
		// restraint every model sends (twice: at 15 and 20 min) where
		// the record would hold, and at its end (30m4s) it sends where
		// the record would probe.
		name:     "store-ttl-below-restraint",
		storeTTL: 10 * mn,
		calls:    cat(trip("h", 0, 5), []Call{allow(15*mn, "h"), allow(20*mn, "h"), allow(30*mn+4*sec, "h")}),
		want: map[string]ExpiryEffects{
			"fedify-model@ttl10m": {SilentCloses: 1, SendsInsteadOfHold: 2, SendsInsteadOfProbe: 1},
			"two-field@ttl10m":    {SilentCloses: 1, SendsInsteadOfHold: 2, SendsInsteadOfProbe: 1},
			"kvbreaker@ttl10m":    {SilentCloses: 1, SendsInsteadOfHold: 2, SendsInsteadOfProbe: 1},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := replay(t, tc.o, tc.storeTTL, tc.calls)
			names := []string{"fedify-model", "two-field", "kvbreaker"}
			if tc.storeTTL > 0 {
				names = []string{"fedify-model@ttl10m", "two-field@ttl10m", "kvbreaker@ttl10m"}
			}
			if len(got) != len(names) {
				t.Fatalf("models %v, want %v", got, names)
			}
			ref := got[names[0]]
			for _, name := range names {
				m, ok := got[name]
				if !ok {
					t.Fatalf("no model %q", name)
				}
				if m.ExpiryEffects != tc.want[name] {
					t.Errorf("%s: expiry effects %+v, want %+v", name, m.ExpiryEffects, tc.want[name])
				}
				if miss := ref.Transitions - m.Transitions; tc.labels[name] != 0 && miss != tc.labels[name] {
					t.Errorf("%s reported %d state changes, the reference %d: want %d fewer", name, m.Transitions, ref.Transitions, tc.labels[name])
				}
			}
			// two-field re-arms on the failure at 10 min (two fields
			// cannot tell a late failure from a probe's): not an expiry.
			if kv := got["kvbreaker"]; tc.want == nil && (kv.Agreement != 1 || kv.TransitionMismatches != 0 || kv.Probes != 2) {
				t.Errorf("negative control: kvbreaker differs from the reference: %+v", kv)
			}
		})
	}
}

// TestExpiryCountsCanFail: the check above must be able to fail. The
// idle-gap stream asked a second before the derived record expires is a
// probe for every model: its counts are zero, so a test that expected the
// idle-gap counts there would fail.
func TestExpiryCountsCanFail(t *testing.T) {
	got := replay(t, Options{}, 0, cat(trip("h", 0, 5), []Call{allow(30*mn+8*sec, "h")}))
	for name, m := range got {
		if m.ExpiryEffects.total() != 0 || m.Probes != 1 {
			t.Errorf("%s asked 1 s before its record expires: %+v, want a probe and no expiry effect", name, m)
		}
	}
	got = replay(t, Options{}, 0, cat(trip("h", 0, 5), []Call{allow(30*mn+9*sec, "h")}))
	if kv := got["kvbreaker"]; kv.SilentCloses != 1 || kv.SendsInsteadOfProbe != 1 || kv.Probes != 0 {
		t.Errorf("kvbreaker asked when its record expires (30m9s): %+v", kv)
	}
}

func TestReplayRejects(t *testing.T) {
	if _, err := Replay(Options{}, 0, []Call{allow(mn, "h"), allow(0, "h")}); err == nil {
		t.Error("calls going back in time accepted")
	}
	if _, err := Replay(Options{StateTTL: 10 * mn}, 0, nil); err == nil {
		t.Error("state TTL below the recovery delay accepted")
	}
}
