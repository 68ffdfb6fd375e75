package machine

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func testConfig(t *testing.T, s Config) *Config {
	t.Helper()
	c, err := NewConfig(s, driver.Traits{Atomic: true})
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

func failures(ds ...time.Duration) []time.Time {
	var f []time.Time
	for _, d := range ds {
		f = append(f, at(d))
	}
	return f
}

func TestAllowStep(t *testing.T) {
	c := testConfig(t, Config{})
	open := record.Record{Failures: failures(0, 1, 2, 3, 4), RestrainedUntil: at(30 * time.Minute)}
	half := record.Record{Failures: open.Failures, RestrainedUntil: at(60 * time.Minute), Probing: true}
	cases := []struct {
		name      string
		rec       record.Record
		now       time.Time
		heldSince time.Time
		want      Decision
		retryAt   time.Time
		write     Write
		from, to  record.State
	}{
		{name: "absent-sends", now: at(0), want: Send, from: record.StateClosed, to: record.StateClosed},
		{name: "closed-with-failures-sends", rec: record.Record{Failures: failures(0, 1)}, now: at(time.Minute), want: Send},
		{name: "open-holds-until-restrained", rec: open, now: at(10 * time.Minute), want: Hold, retryAt: at(30 * time.Minute), from: record.StateOpen, to: record.StateOpen},
		{name: "open-elapsed-probes", rec: open, now: at(30 * time.Minute), want: Probe, write: WritePut, from: record.StateOpen, to: record.StateHalfOpen},
		{name: "half-open-holds-release-interval", rec: half, now: at(31 * time.Minute), want: Hold, retryAt: at(31*time.Minute + time.Second), from: record.StateHalfOpen, to: record.StateHalfOpen},
		{name: "half-open-release-capped-at-restraint", rec: half, now: at(60*time.Minute - 300*time.Millisecond), want: Hold, retryAt: at(60 * time.Minute), from: record.StateHalfOpen, to: record.StateHalfOpen},
		{name: "stale-probe-taken-over", rec: half, now: at(60 * time.Minute), want: Probe, write: WritePut, from: record.StateHalfOpen, to: record.StateHalfOpen},
		{name: "retry-capped-at-hold-limit", rec: open, now: at(10 * time.Minute), heldSince: at(10*time.Minute - c.HoldLimit + time.Minute), want: Hold, retryAt: at(11 * time.Minute), from: record.StateOpen, to: record.StateOpen},
		{name: "dropped-exactly-at-hold-limit", rec: open, now: at(10 * time.Minute), heldSince: at(10*time.Minute - c.HoldLimit), want: Drop, from: record.StateOpen, to: record.StateOpen},
		{name: "not-dropped-just-before-hold-limit", rec: open, now: at(10 * time.Minute), heldSince: at(10*time.Minute - c.HoldLimit + time.Millisecond), want: Hold, retryAt: at(10*time.Minute + time.Millisecond), from: record.StateOpen, to: record.StateOpen},
		{name: "dropped-even-when-closed", now: at(c.HoldLimit), heldSince: at(0), want: Drop},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := AllowStep(tc.rec, tc.now, tc.heldSince, c)
			if st.Decision != tc.want || !st.RetryAt.Equal(tc.retryAt) || st.Write != tc.write || st.From != tc.from || st.To != tc.to {
				t.Fatalf("got %v retry %v write %v %v→%v; want %v retry %v write %v %v→%v",
					st.Decision, st.RetryAt, st.Write, st.From, st.To, tc.want, tc.retryAt, tc.write, tc.from, tc.to)
			}
			if st.Decision == Probe {
				if !st.Record.Probing || !st.Record.RestrainedUntil.Equal(tc.now.Add(c.RecoveryDelay)) {
					t.Fatalf("probe record %+v: want probing until now+RecoveryDelay", st.Record)
				}
				if len(st.Record.Failures) != len(tc.rec.Failures) {
					t.Fatalf("probe changed failures: %v", st.Record.Failures)
				}
			}
		})
	}
}

func TestFailureStep(t *testing.T) {
	c := testConfig(t, Config{})
	cases := []struct {
		name     string
		cfg      *Config
		rec      record.Record
		now      time.Duration
		from, to record.State
		write    Write
		fails    int
		restrain time.Duration // RestrainedUntil - t0, or -1 for none
	}{
		{name: "first-failure-counts", now: 0, write: WritePut, fails: 1, restrain: -1},
		{name: "below-threshold-stays-closed", rec: record.Record{Failures: failures(0, 1, 2)}, now: 3, write: WritePut, fails: 4, restrain: -1},
		{name: "threshold-opens", rec: record.Record{Failures: failures(0, 1, 2, 3)}, now: 4, to: record.StateOpen, write: WritePut, fails: 5, restrain: 4 + 30*time.Minute},
		{name: "old-failures-age-out", rec: record.Record{Failures: failures(0, 1, 2, 3)}, now: 10*time.Minute + 2, write: WritePut, fails: 3, restrain: -1},
		{name: "window-boundary-inclusive", rec: record.Record{Failures: failures(0, 1, 2, 3)}, now: 10 * time.Minute, to: record.StateOpen, write: WritePut, fails: 5, restrain: 40 * time.Minute},
		{name: "open-ignores-failures", rec: record.Record{Failures: failures(0, 1, 2, 3, 4), RestrainedUntil: at(30 * time.Minute)}, now: 5 * time.Minute, from: record.StateOpen, to: record.StateOpen, write: WriteNone, fails: 5, restrain: 30 * time.Minute},
		{name: "open-elapsed-still-ignores", rec: record.Record{Failures: failures(0, 1, 2, 3, 4), RestrainedUntil: at(30 * time.Minute)}, now: 31 * time.Minute, from: record.StateOpen, to: record.StateOpen, write: WriteNone, fails: 5, restrain: 30 * time.Minute},
		{name: "failed-probe-reopens", rec: record.Record{Failures: failures(0, 1, 2, 3, 4), RestrainedUntil: at(60 * time.Minute), Probing: true}, now: 31 * time.Minute, from: record.StateHalfOpen, to: record.StateOpen, write: WritePut, fails: 1, restrain: 61 * time.Minute},
		// RecoveryDelay (30 min) > FailureWindow (10 min): the tripping
		// failures have aged out by probe time, yet one failed probe
		// reopens the circuit.
		{name: "half-open-single-strike-reopen", rec: record.Record{Failures: failures(0, 1, 2, 3, 4), RestrainedUntil: at(90 * time.Minute), Probing: true}, now: 60 * time.Minute, from: record.StateHalfOpen, to: record.StateOpen, write: WritePut, fails: 1, restrain: 90 * time.Minute},
		{name: "threshold-one-opens-on-first", cfg: testConfig(t, Config{FailureThreshold: 1}), now: 0, to: record.StateOpen, write: WritePut, fails: 1, restrain: 30 * time.Minute},
		{name: "custom-policy-trips", cfg: testConfig(t, Config{StateTTL: time.Hour, FailurePolicy: func(f []time.Time) bool { return len(f) >= 2 }}), rec: record.Record{Failures: failures(0)}, now: 24 * time.Hour, to: record.StateOpen, write: WritePut, fails: 2, restrain: 24*time.Hour + 30*time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := c
			if tc.cfg != nil {
				cfg = tc.cfg
			}
			st := FailureStep(tc.rec, at(tc.now), cfg)
			if st.From != tc.from || st.To != tc.to || st.Write != tc.write {
				t.Fatalf("got %v→%v write %v; want %v→%v write %v", st.From, st.To, st.Write, tc.from, tc.to, tc.write)
			}
			rec := st.Record
			if st.Write == WriteNone {
				rec = tc.rec
			}
			if len(rec.Failures) != tc.fails {
				t.Fatalf("failures %v: want %d", rec.Failures, tc.fails)
			}
			want := time.Time{}
			if tc.restrain >= 0 {
				want = at(tc.restrain)
			}
			if !rec.RestrainedUntil.Equal(want) || rec.Probing {
				t.Fatalf("restrained until %v probing %v; want %v, not probing", rec.RestrainedUntil, rec.Probing, want)
			}
			if st.Write == WritePut && !rec.Opened().Equal(at(tc.now)) && st.To == record.StateOpen {
				t.Fatalf("opened %v: want the tripping failure %v", rec.Opened(), at(tc.now))
			}
		})
	}
}

func TestSuccessStep(t *testing.T) {
	cases := []struct {
		name  string
		rec   record.Record
		from  record.State
		write Write
	}{
		{name: "absent-no-write", from: record.StateClosed, write: WriteNone},
		{name: "closed-with-failures-deletes", rec: record.Record{Failures: failures(0)}, from: record.StateClosed, write: WriteDelete},
		{name: "open-closes", rec: record.Record{Failures: failures(0), RestrainedUntil: at(time.Hour)}, from: record.StateOpen, write: WriteDelete},
		{name: "half-open-closes", rec: record.Record{Failures: failures(0), RestrainedUntil: at(time.Hour), Probing: true}, from: record.StateHalfOpen, write: WriteDelete},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := SuccessStep(tc.rec, at(0), testConfig(t, Config{}))
			if st.From != tc.from || st.To != record.StateClosed || st.Write != tc.write {
				t.Fatalf("got %v→%v write %v; want %v→closed write %v", st.From, st.To, st.Write, tc.from, tc.write)
			}
		})
	}
}

func TestPruneKeepsOrderUnderSkew(t *testing.T) {
	c := testConfig(t, Config{})
	// This worker's clock is behind the one that wrote the last failure:
	// that failure is clamped to this writer's now, so the history
	// stays sorted and no instant lies past the writer's now.
	got := c.prune(failures(1*time.Second, 3*time.Second), at(2*time.Second))
	want := failures(1*time.Second, 2*time.Second, 2*time.Second)
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range got {
		if !got[i].Equal(want[i]) {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	long := c.prune(failures(0, 1, 2, 3, 4, 5, 6), at(7))
	if len(long) != c.FailureThreshold || !long[len(long)-1].Equal(at(7)) {
		t.Fatalf("history not capped at threshold, newest kept: %v", long)
	}
}

// TestOpenedIsNewestFailure checks the note's invariant opened ==
// max(failures) over random event sequences.
func TestOpenedIsNewestFailure(t *testing.T) {
	c := testConfig(t, Config{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: 5 * time.Minute})
	rng := rand.New(rand.NewPCG(1, 2))
	var rec record.Record
	var opened time.Time
	now := t0
	for i := range 100000 {
		now = now.Add(time.Duration(rng.IntN(int(40 * time.Second))))
		var st Step
		switch rng.IntN(10) {
		case 0:
			st = SuccessStep(rec, now, c)
		case 1, 2, 3, 4:
			st = FailureStep(rec, now, c)
		default:
			st = AllowStep(rec, now, time.Time{}, c)
		}
		switch st.Write {
		case WritePut:
			rec = st.Record
		case WriteDelete:
			rec = record.Record{}
		}
		if st.To == record.StateOpen && st.From != record.StateOpen {
			opened = now
		}
		if rec.State() != record.StateClosed && !rec.Opened().Equal(opened) {
			t.Fatalf("step %d: opened %v but max(failures) %v (%+v)", i, opened, rec.Opened(), rec)
		}
	}
}

// TestDeletionOnlyTurnsHoldIntoSend: the record is advisory. Losing it at any
// step makes Allow answer Send where it would have held or probed, never the
// reverse.
func TestDeletionOnlyTurnsHoldIntoSend(t *testing.T) {
	c := testConfig(t, Config{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: 3 * time.Minute})
	rng := rand.New(rand.NewPCG(3, 4))
	var rec record.Record
	now := t0
	seen := map[[2]Decision]int{}
	for range 100000 {
		now = now.Add(time.Duration(rng.IntN(int(20 * time.Second))))
		if rng.IntN(50) == 0 {
			rec = record.Record{}
		}
		with := AllowStep(rec, now, time.Time{}, c)
		without := AllowStep(record.Record{}, now, time.Time{}, c)
		if without.Decision != Send {
			t.Fatalf("absent record decided %v", without.Decision)
		}
		seen[[2]Decision{with.Decision, without.Decision}]++
		var st Step
		switch rng.IntN(4) {
		case 0:
			st = FailureStep(rec, now, c)
		case 1:
			st = with
		default:
			st = FailureStep(rec, now, c)
		}
		switch st.Write {
		case WritePut:
			rec = st.Record
		case WriteDelete:
			rec = record.Record{}
		}
	}
	for _, d := range []Decision{Send, Hold, Probe} {
		if seen[[2]Decision{d, Send}] == 0 {
			t.Errorf("the walk never reached %v; the property was not exercised", d)
		}
	}
}

func TestAllowClosedDoesNotAllocate(t *testing.T) {
	c := testConfig(t, Config{})
	rec := record.Record{Failures: failures(0, 1)}
	open := record.Record{Failures: failures(0), RestrainedUntil: at(time.Hour)}
	if n := testing.AllocsPerRun(1000, func() { AllowStep(rec, at(time.Minute), time.Time{}, c) }); n != 0 {
		t.Fatalf("closed allow allocates %v times", n)
	}
	if n := testing.AllocsPerRun(1000, func() { AllowStep(open, at(time.Minute), time.Time{}, c) }); n != 0 {
		t.Fatalf("open allow allocates %v times", n)
	}
}

func BenchmarkAllowStepClosed(b *testing.B) {
	c, _ := NewConfig(Config{}, driver.Traits{})
	rec := record.Record{Failures: failures(0, 1)}
	b.ReportAllocs()
	for b.Loop() {
		AllowStep(rec, at(time.Minute), time.Time{}, &c)
	}
}

func BenchmarkFailureStep(b *testing.B) {
	c, _ := NewConfig(Config{}, driver.Traits{})
	rec := record.Record{Failures: failures(0, 1, 2)}
	b.ReportAllocs()
	for b.Loop() {
		FailureStep(rec, at(time.Minute), &c)
	}
}

// TestNoFailureAfterWriterNow: whatever a step writes holds no failure
// instant after the writer's now, so no failure outlives the record (which
// lives until the writer's now + StateTTL). A failure stamped by a clock
// 2 s fast, carried as is by FailureStep or by the probe's write, would
// count past the end of the record that holds it.
func TestNoFailureAfterWriterNow(t *testing.T) {
	c := testConfig(t, Config{FailureThreshold: 5})
	now := at(time.Hour)
	fast := []time.Time{now.Add(-time.Minute), now.Add(time.Second), now.Add(2 * time.Second)}
	check := func(name string, st Step) {
		t.Helper()
		if st.Write != WritePut {
			t.Fatalf("%s: no write", name)
		}
		for _, f := range st.Record.Failures {
			if f.After(now) {
				t.Errorf("%s wrote failure %v, after the writer's now %v", name, f, now)
			}
		}
	}
	check("FailureStep", FailureStep(record.Record{Failures: fast}, now, c))
	open := record.Record{Failures: fast, RestrainedUntil: now.Add(-time.Millisecond)}
	check("AllowStep probe", AllowStep(open, now, time.Time{}, c))
	// The common case allocates nothing: the probe keeps the slice.
	past := []time.Time{now.Add(-2 * time.Minute), now.Add(-time.Minute)}
	if st := AllowStep(record.Record{Failures: past, RestrainedUntil: now}, now, time.Time{}, c); &st.Record.Failures[0] != &past[0] {
		t.Error("a history with no future instant was copied")
	}
}
