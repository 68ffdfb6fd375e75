package machine

import (
	"slices"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/record"
)

// A worker whose clock is far ahead writes instants from its future. A
// correct worker must never hold a host longer than a correct writer could
// have made it: RecoveryDelay from now.
func TestAllowStepFutureRestraint(t *testing.T) {
	c := testConfig(t, Config{ClockSkew: time.Second})
	year := 365 * 24 * time.Hour
	now := at(0)
	bound := now.Add(c.RecoveryDelay + 2*c.ClockSkew)
	cases := []struct {
		name    string
		rec     record.Record
		write   bool
		retryAt time.Time
		to      record.State
	}{
		{name: "open-a-year-ahead",
			rec:   record.Record{Failures: failures(year, year+1, year+2, year+3, year+4), RestrainedUntil: at(year + 4 + c.RecoveryDelay)},
			write: true, retryAt: now.Add(c.RecoveryDelay), to: record.StateOpen},
		{name: "open-an-hour-ahead",
			rec:   record.Record{Failures: failures(time.Hour), RestrainedUntil: at(time.Hour + c.RecoveryDelay)},
			write: true, retryAt: now.Add(c.RecoveryDelay), to: record.StateOpen},
		{name: "open-restraint-only-no-failures",
			rec:   record.Record{RestrainedUntil: at(year)},
			write: true, retryAt: now.Add(c.RecoveryDelay), to: record.StateOpen},
		{name: "half-open-a-year-ahead",
			rec:   record.Record{Failures: failures(year), RestrainedUntil: at(year + c.RecoveryDelay), Probing: true},
			write: true, retryAt: now.Add(c.ReleaseInterval), to: record.StateHalfOpen},
		{name: "failure-from-the-future-restraint-in-bound",
			rec:   record.Record{Failures: failures(time.Hour), RestrainedUntil: at(10 * time.Minute)},
			write: true, retryAt: now.Add(10 * time.Minute), to: record.StateOpen},
		// Within 2×ClockSkew: a correct worker ahead by ClockSkew of a
		// reader behind by ClockSkew. Held as written, nothing written.
		{name: "restraint-at-the-bound",
			rec:   record.Record{Failures: failures(2 * time.Second), RestrainedUntil: bound},
			write: false, retryAt: bound, to: record.StateOpen},
		{name: "restraint-past-the-bound-by-1ms",
			rec:   record.Record{Failures: failures(0), RestrainedUntil: bound.Add(time.Millisecond)},
			write: true, retryAt: now.Add(c.RecoveryDelay), to: record.StateOpen},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := AllowStep(tc.rec, now, time.Time{}, c)
			if st.Decision != Hold || !st.RetryAt.Equal(tc.retryAt) || st.To != tc.to || st.From != tc.to {
				t.Fatalf("AllowStep = %v retry %v %v→%v; want hold until %v, %v", st.Decision, st.RetryAt, st.From, st.To, tc.retryAt, tc.to)
			}
			if st.RetryAt.After(bound) {
				t.Fatalf("RetryAt %v beyond now+RecoveryDelay+2×ClockSkew %v", st.RetryAt, bound)
			}
			if !tc.write {
				if st.Write != WriteNone {
					t.Fatalf("wrote %+v over a record within the bound", st.Record)
				}
				return
			}
			if st.Write != WritePut {
				t.Fatalf("Write = %v; want the record re-anchored on this clock", st.Write)
			}
			r := st.Record
			if c.Future(r, now) || r.Probing != tc.rec.Probing || r.State() != tc.to {
				t.Fatalf("re-anchored record %+v is still from the future, or changed state", r)
			}
			if len(r.Failures) != len(tc.rec.Failures) {
				t.Fatalf("re-anchored record lost failures: %v from %v", r.Failures, tc.rec.Failures)
			}
			for _, f := range r.Failures {
				if f.After(now) {
					t.Fatalf("failure %v after now %v", f, now)
				}
			}
			// Asked again at its RetryAt, the host is held no further than
			// the record said: the bound does not slide.
			if st2 := AllowStep(r, st.RetryAt, now, c); st2.Write == WritePut && st2.Decision != Probe {
				t.Fatalf("re-anchored record re-anchored again at %v: %+v", st.RetryAt, st2)
			}
		})
	}
}

func TestFuture(t *testing.T) {
	c := testConfig(t, Config{ClockSkew: 2 * time.Second})
	now := at(0)
	cases := []struct {
		rec  record.Record
		want bool
	}{
		{record.Record{}, false},
		{record.Record{Failures: failures(4 * time.Second)}, false},
		{record.Record{Failures: failures(-time.Hour, 4*time.Second+time.Millisecond)}, true},
		{record.Record{Failures: failures(time.Hour, 0)}, false}, // only the newest counts: failures are kept sorted
		{record.Record{RestrainedUntil: now.Add(c.RecoveryDelay + 4*time.Second)}, false},
		{record.Record{RestrainedUntil: now.Add(c.RecoveryDelay + 4*time.Second + time.Millisecond)}, true},
	}
	for i, tc := range cases {
		if got := c.Future(tc.rec, now); got != tc.want {
			t.Errorf("%d: Future(%+v) = %v; want %v", i, tc.rec, got, tc.want)
		}
	}
}

// clampFuture moves every future instant, also the only one, to now, and
// copies only when it must.
func TestClampFuture(t *testing.T) {
	now := at(0)
	cases := []struct {
		in, want []time.Time
		same     bool
	}{
		{in: nil, want: nil, same: true},
		{in: failures(time.Hour), want: failures(0)},
		{in: failures(-time.Hour), want: failures(-time.Hour), same: true},
		{in: failures(-time.Hour, 0), want: failures(-time.Hour, 0), same: true},
		{in: failures(-time.Hour, time.Minute, time.Hour), want: failures(-time.Hour, 0, 0)},
	}
	for i, tc := range cases {
		in := slices.Clone(tc.in)
		got := clampFuture(in, now)
		if !slices.EqualFunc(got, tc.want, time.Time.Equal) {
			t.Errorf("%d: clampFuture(%v) = %v; want %v", i, tc.in, got, tc.want)
		}
		if !slices.EqualFunc(in, tc.in, time.Time.Equal) {
			t.Errorf("%d: clampFuture changed its argument to %v", i, in)
		}
		if tc.same && len(in) > 0 && &got[0] != &in[0] {
			t.Errorf("%d: clampFuture copied a slice with nothing to clamp", i)
		}
	}
}

// A restrained record with no failures (a foreign or hand-made one) probes
// without a crash once its restraint has passed.
func TestAllowStepRestrainedNoFailures(t *testing.T) {
	c := testConfig(t, Config{})
	st := AllowStep(record.Record{RestrainedUntil: at(0)}, at(time.Minute), time.Time{}, c)
	if st.Decision != Probe || len(st.Record.Failures) != 0 {
		t.Fatalf("AllowStep = %+v; want a probe with no failures", st)
	}
}
