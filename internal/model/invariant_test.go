package model

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/internal/machine"
)

// fstate is a reachable fedify store state for one host at an instant.
type fstate struct {
	rec     FedifyRecord
	found   bool
	expires time.Time
	now     time.Time
}

// key canonicalises s relative to now, so states that differ only by a
// shift in time are visited once.
func (s fstate) key() string {
	if !s.found {
		return "absent"
	}
	rel := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return fmt.Sprint(t.Sub(s.now).Milliseconds())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%v o=%s h=%s x=%s f=", s.rec.State, rel(s.rec.Opened), rel(s.rec.HalfOpened), rel(s.expires))
	for _, f := range s.rec.Failures {
		b.WriteString(rel(f) + ",")
	}
	return b.String()
}

// TestOpenedIsMaxFailures explores every fedify state reachable within a
// bounded number of steps (decisions, failures, successes and time
// advances across every boundary: release interval, window, recovery
// delay, the record's TTL) and checks the note's invariant
// opened == max(failures) in each.
func TestOpenedIsMaxFailures(t *testing.T) {
	for _, tc := range []struct {
		o     FedifyOptions
		depth int
		// halfOpen: the exploration must reach half-open. With stateTtl ==
		// recoveryDelay (the least fedify 2.3.3+ accepts) it cannot: the open
		// record expires at the very instant it would probe.
		halfOpen bool
	}{
		{FedifyOptions{FailureThreshold: 1, FailureWindow: 10 * time.Second, RecoveryDelay: 30 * time.Second, ReleaseInterval: time.Second}, 7, true},
		{FedifyOptions{FailureThreshold: 2, FailureWindow: 10 * time.Second, RecoveryDelay: 30 * time.Second, ReleaseInterval: time.Second}, 7, true},
		{FedifyOptions{FailureThreshold: 3, FailureWindow: 60 * time.Second, RecoveryDelay: 20 * time.Second, ReleaseInterval: time.Second}, 6, true},
		{FedifyOptions{FailureThreshold: 2, FailureWindow: 10 * time.Second, RecoveryDelay: 30 * time.Second, ReleaseInterval: time.Second, StateTTL: 30 * time.Second}, 10, false},
	} {
		o := tc.o
		t.Run(fmt.Sprintf("threshold=%d,window=%v,recovery=%v,ttl=%v", o.FailureThreshold, o.FailureWindow, o.RecoveryDelay, o.StateTTL), func(t *testing.T) {
			c, err := NewFedifyConfig(o)
			if err != nil {
				t.Fatal(err)
			}
			ms := time.Millisecond
			advances := []time.Duration{0, ms, c.ReleaseInterval, c.FailureWindow - ms, c.FailureWindow, c.FailureWindow + ms,
				c.RecoveryDelay - ms, c.RecoveryDelay, c.RecoveryDelay + ms, c.StateTTL}
			start := fstate{now: t0}
			seen := map[string]bool{start.key(): true}
			frontier := []fstate{start}
			kinds := map[kvbreaker.State]int{}
			for d := 0; d < tc.depth && len(frontier) > 0; d++ {
				var next []fstate
				for _, s := range frontier {
					for _, adv := range advances {
						now := s.now.Add(adv)
						cur := s
						cur.now = now
						if cur.found && !now.Before(cur.expires) {
							cur = fstate{now: now}
						}
						for _, op := range []string{"allow", "fail", "ok"} {
							var st FedifyStep
							switch op {
							case "allow":
								st = FedifyBeforeSend(cur.rec, cur.found, now, time.Time{}, &c)
							case "fail":
								st = FedifyRecordFailure(cur.rec, cur.found, now, &c)
							case "ok":
								st = FedifyRecordSuccess(cur.rec, cur.found)
							}
							n := cur
							switch st.Write {
							case machine.WritePut:
								n = fstate{rec: st.Record, found: true, expires: now.Add(c.StateTTL), now: now}
							case machine.WriteDelete:
								n = fstate{now: now}
							}
							if n.found {
								if err := CheckOpenedInvariant(n.rec); err != nil {
									t.Fatalf("after %s at +%v from %s: %v", op, adv, s.key(), err)
								}
								kinds[n.rec.State]++
							}
							if k := n.key(); !seen[k] {
								seen[k] = true
								next = append(next, n)
							}
						}
					}
				}
				frontier = next
			}
			t.Logf("%d distinct states checked (by state: %v)", len(seen), kinds)
			if kinds[kvbreaker.StateOpen] == 0 || (kinds[kvbreaker.StateHalfOpen] == 0) == tc.halfOpen {
				t.Fatalf("exploration reached %v; want open, and half-open only if halfOpen = %v", kinds, tc.halfOpen)
			}
		})
	}
}

// TestCheckOpenedInvariantCatches makes sure the check can fail.
func TestCheckOpenedInvariantCatches(t *testing.T) {
	for _, r := range []FedifyRecord{
		{State: kvbreaker.StateOpen, Failures: []time.Time{at(0), at(sec)}, Opened: at(0)},
		{State: kvbreaker.StateHalfOpen, Opened: at(0)},
		{State: kvbreaker.StateClosed, Failures: []time.Time{at(0)}, Opened: at(0)},
	} {
		if CheckOpenedInvariant(r) == nil {
			t.Errorf("%+v passed the check", r)
		}
	}
	if err := CheckOpenedInvariant(FedifyRecord{State: kvbreaker.StateOpen, Failures: []time.Time{at(0), at(sec)}, Opened: at(sec)}); err != nil {
		t.Error(err)
	}
}
