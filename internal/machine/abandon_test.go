package machine

import (
	"slices"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/record"
)

func TestAbandonStep(t *testing.T) {
	c := testConfig(t, Config{})
	fs := failures(0, 1, 2, 3, 4)
	claimedAt := at(30 * time.Minute)
	claim := claimedAt.Add(c.RecoveryDelay)
	probing := record.Record{Failures: fs, RestrainedUntil: claim, Probing: true}
	now := claimedAt.Add(2 * time.Second)
	cases := []struct {
		name     string
		rec      record.Record
		claim    time.Time
		write    Write
		from, to record.State
	}{
		{name: "own-claim-released", rec: probing, claim: claim, write: WritePut, from: record.StateHalfOpen, to: record.StateOpen},
		{name: "taken-over-by-a-later-probe", rec: record.Record{Failures: fs, RestrainedUntil: claim.Add(time.Minute), Probing: true}, claim: claim, from: record.StateHalfOpen, to: record.StateHalfOpen},
		{name: "probe-failed-and-reopened", rec: record.Record{Failures: fs, RestrainedUntil: claim}, claim: claim, from: record.StateOpen, to: record.StateOpen},
		{name: "closed-by-a-success", rec: record.Record{}, claim: claim, from: record.StateClosed, to: record.StateClosed},
		{name: "no-claim", rec: probing, from: record.StateHalfOpen, to: record.StateHalfOpen},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := AbandonStep(tc.rec, tc.claim, now)
			if st.Write != tc.write || st.From != tc.from || st.To != tc.to {
				t.Fatalf("write %v %v→%v; want write %v %v→%v", st.Write, st.From, st.To, tc.write, tc.from, tc.to)
			}
			if st.Write == WriteNone {
				return
			}
			want := record.Record{Failures: fs, RestrainedUntil: now}
			if st.Record.Probing || !st.Record.RestrainedUntil.Equal(now) || !slices.Equal(st.Record.Failures, want.Failures) {
				t.Fatalf("released record %+v, want %+v", st.Record, want)
			}
			// The point of the release: the next Allow, at the same
			// instant, elects a probe instead of holding.
			if next := AllowStep(st.Record, now, time.Time{}, c); next.Decision != Probe {
				t.Fatalf("Allow after release: %v, want probe", next.Decision)
			}
		})
	}
	// Control: without the release the same Allow holds until the claim.
	if st := AllowStep(probing, now, time.Time{}, c); st.Decision != Hold {
		t.Fatalf("Allow on the claim: %v, want hold", st.Decision)
	}
}
