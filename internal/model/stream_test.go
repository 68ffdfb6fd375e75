package model

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
)

// streamOptions draws a configuration with small, boundary-prone values.
func streamOptions(rng *rand.Rand) (FedifyOptions, TwoFieldConfig, kvbreaker.Settings) {
	pick := func(ds ...time.Duration) time.Duration { return ds[rng.IntN(len(ds))] }
	th := []int{1, 2, 3, 5}[rng.IntN(4)]
	win := pick(time.Minute, 10*time.Minute)
	rd := pick(30*time.Second, 5*time.Minute, 30*time.Minute)
	ri := pick(time.Second, 10*time.Second)
	hl := pick(10*time.Minute, 7*24*time.Hour)
	return FedifyOptions{FailureThreshold: th, FailureWindow: win, RecoveryDelay: rd, ReleaseInterval: ri, HeldActivityTTL: hl},
		TwoFieldConfig{FailureThreshold: th, FailureWindow: win, RecoveryDelay: rd, HoldLimit: hl},
		kvbreaker.Settings{FailureThreshold: th, FailureWindow: win, RecoveryDelay: rd, ReleaseInterval: ri, HoldLimit: hl}
}

// streamBackoff turns recovery back-off on in the two configurations that
// have it (fedify's model has not), drawing the factor (zero for the
// default 2) and a cap that is RecoveryDelay itself, reached exactly at a
// level, between two levels, or only after several failed probes.
//
// kvbreaker keeps instants to the millisecond, so a restraint with a
// fraction of a millisecond ends up to 1 ms before the rule's instant;
// the two-field model keeps the rule's. Every restraint drawn here is whole
// milliseconds: RecoveryDelay × 1.5^n is while 2^n divides RecoveryDelay
// in milliseconds, up to level 4 for the 30 s drawn, enough for a cap of
// 5×RecoveryDelay (1.5^4 > 5) but not of 100×.
func streamBackoff(rng *rand.Rand, so *TwoFieldConfig, ks *kvbreaker.Settings) {
	m := []float64{0, 1.5, 3}[rng.IntN(3)]
	caps := []time.Duration{1, 2, 4, 5, 100}
	if m == 1.5 {
		caps = caps[:4]
	}
	mx := so.RecoveryDelay * caps[rng.IntN(len(caps))]
	so.MaxRecoveryDelay, so.RecoveryMultiplier = mx, m
	ks.MaxRecoveryDelay, ks.RecoveryMultiplier = mx, m
}

// streamRun says how runStream plays: with stale, a probe may stay
// unanswered past RecoveryDelay, so another worker takes it over; with
// backoff, recovery back-off is on; twoField, when set, changes the
// two-field model's configuration after the draw (a negative control's);
// mirror adds options to the mirror.
type streamRun struct {
	stale, backoff bool
	twoField       func(*TwoFieldConfig)
	mirror         []Option
}

// add reports st's mismatches and counts its stream into s.
func (s *streamStats) add(t *testing.T, st streamStats) {
	t.Helper()
	for _, m := range st.mismatches {
		t.Error(m)
	}
	s.decisions += st.decisions
	s.holds += st.holds
	s.probes += st.probes
	s.drops += st.drops
	s.transitions += st.transitions
	s.maxLevel = max(s.maxLevel, st.maxLevel)
}

type heldMsg struct{ since, retry time.Time }

type streamStats struct {
	decisions, holds, probes, drops, transitions, staleProbes int
	maxLevel                                                  int // the highest back-off level kvbreaker reached
	mismatches                                                []string
}

// runStream plays one random sequential stream against one host of every
// model: a plain send's outcome is reported before the host's next
// decision; while a probe is in flight, held messages come back at their
// retry instants and new ones arrive (half-open holds). A restrained host
// is asked again by the end of its restraint (its held messages, or new
// traffic, come back then). A fourth model, kvbreaker deciding from a
// mirror with no propagation delay, must agree with kvbreaker (and so
// fedify) on everything. r says how the stream plays.
//
// With back-off, fedify's model, which has no such option, is left out of
// every comparison: kvbreaker is the reference the others must agree with,
// and the restraint a restrained host is asked again at is kvbreaker's.
func runStream(t *testing.T, seed uint64, steps int, r streamRun) (st streamStats) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	fo, so, ks := streamOptions(rng)
	if r.backoff {
		streamBackoff(rng, &so, &ks)
	}
	if r.twoField != nil {
		r.twoField(&so)
	}
	fed, err := NewFedify(fo)
	if err != nil {
		t.Fatal(err)
	}
	sd, err := NewTwoField(so)
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	kv, err := NewKvbreaker(ks, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	mir, err := NewKvbreaker(ks, func() time.Time { return now }, append([]Option{WithMirror(0)}, r.mirror...)...)
	if err != nil {
		t.Fatal(err)
	}
	models := []Model{fed, sd, kv, mir}
	ref, refName := 0, "fedify"
	if r.backoff {
		ref, refName = 2, "kvbreaker"
	}
	cfg := fed.Config()
	pOK := []float64{0.05, 0.3, 0.7}[rng.IntN(3)]
	gaps := []time.Duration{0, time.Millisecond, 999 * time.Millisecond, time.Second, 30 * time.Second,
		5 * time.Minute, cfg.FailureWindow - time.Millisecond, cfg.FailureWindow, cfg.FailureWindow + time.Millisecond,
		cfg.RecoveryDelay - time.Millisecond, cfg.RecoveryDelay, cfg.RecoveryDelay + time.Millisecond, 2 * time.Hour}
	lats := []time.Duration{0, time.Millisecond, time.Second, 10 * time.Second}
	if r.backoff {
		mx := sd.Config().MaxRecoveryDelay
		gaps = append(gaps, mx-time.Millisecond, mx, mx+time.Millisecond)
	}
	if r.stale {
		lats = append(lats, cfg.RecoveryDelay, cfg.RecoveryDelay+time.Second, 2*cfg.RecoveryDelay+time.Second)
	}

	var held []heldMsg
	var probes []time.Time // outcome instants of probes in flight
	vs := make([]Verdict, len(models))
	trs := make([]Transition, len(models))
	mismatch := func(format string, a ...any) {
		if len(st.mismatches) < 5 {
			st.mismatches = append(st.mismatches, fmt.Sprintf("seed %d %+v: ", seed, fo)+fmt.Sprintf(format, a...))
		}
	}
	labels := func(what string) {
		if trs[ref].Changed() {
			st.transitions++
		}
		for i := range models {
			if i >= 2 && trs[i] != trs[ref] {
				mismatch("%s at %v: %s reported %s, %s %s", what, now.Sub(t0), models[i].Name(), trs[i], refName, trs[ref])
			}
		}
		// Two fields cannot tell half-open from open (the note's cost
		// (a)): its label must be kvbreaker's with half-open read as open.
		if two, kvl := twoFieldLabel(trs[1]), twoFieldLabel(trs[2]); two != kvl {
			mismatch("%s at %v: %s reported %s, kvbreaker %s (%s)", what, now.Sub(t0), models[1].Name(), two, kvl, trs[2])
		}
	}
	outcome := func() {
		ok := rng.Float64() < pOK
		for i, m := range models {
			if ok {
				trs[i] = m.Success("h", now)
			} else {
				trs[i] = m.Failure("h", now)
			}
		}
		labels("outcome")
		if rec, ok := kv.Record("h"); ok {
			st.maxLevel = max(st.maxLevel, int(rec.Backoff))
		}
	}
	for range steps {
		// The next event: a probe's outcome, a held message's retry, or
		// an arrival, whichever comes first.
		next := now.Add(gaps[rng.IntN(len(gaps))])
		if len(held) == 0 {
			var end time.Time
			if r.backoff {
				if rec, ok := kv.Record("h"); ok {
					end = rec.RestrainedUntil
				}
			} else if rec, ok := fed.Record("h", now); ok && rec.State != kvbreaker.StateClosed {
				end = rec.Opened.Add(cfg.RecoveryDelay)
				if rec.State == kvbreaker.StateHalfOpen {
					end = rec.HalfOpened.Add(cfg.RecoveryDelay)
				}
			}
			if !end.IsZero() && next.After(end) {
				next = end
			}
		}
		kind, idx := "arrive", -1
		for i, h := range held {
			if !h.retry.After(next) {
				next, kind, idx = h.retry, "retry", i
			}
		}
		for i, p := range probes {
			if !p.After(next) {
				next, kind, idx = p, "probe-outcome", i
			}
		}
		// A send's outcome may have moved now past a retry or a probe's
		// outcome: that one happens now, late. Time never runs back; a
		// record written at a later instant than a call reading it is a
		// fast clock's, which kvbreaker bounds (machine.Config.Future)
		// where fedify has no such bound.
		now = later(now, next)
		if kind == "probe-outcome" {
			probes = slices.Delete(probes, idx, idx+1)
			outcome()
			continue
		}
		var since time.Time
		if kind == "retry" {
			since = held[idx].since
			held = slices.Delete(held, idx, idx+1)
		}
		for i, m := range models {
			vs[i], trs[i] = m.Allow("h", now, since)
		}
		st.decisions++
		want := vs[ref]
		for i, m := range models {
			if i == ref || r.backoff && i == 0 {
				continue
			}
			if vs[i].Decision != want.Decision {
				mismatch("allow at %v (held since %v): %s decided %v, %s %v", now.Sub(t0), since, m.Name(), vs[i].Decision, refName, want.Decision)
			}
		}
		// The two-field model retries at RestrainedUntil even with a probe
		// out (the note's cost (b)), so its retry instant is compared only
		// while no probe is out: there it is the restraint's end.
		retries := []int{2, 3}
		if rec, ok := kv.Record("h"); ok && !rec.Probing {
			retries = append(retries, 1)
		}
		for _, i := range retries {
			if want.Decision == kvbreaker.Hold && !vs[i].RetryAt.Equal(want.RetryAt) {
				mismatch("allow at %v: %s retries at %v, %s at %v", now.Sub(t0), models[i].Name(), vs[i].RetryAt.Sub(t0), refName, want.RetryAt.Sub(t0))
			}
		}
		labels("allow")
		switch want.Decision {
		case kvbreaker.Send:
			now = now.Add(lats[rng.IntN(4)]) // a send's outcome comes before anything else
			outcome()
		case kvbreaker.Probe:
			st.probes++
			if len(probes) > 0 {
				st.staleProbes++
			}
			probes = append(probes, now.Add(lats[rng.IntN(len(lats))]))
		case kvbreaker.Hold:
			st.holds++
			if since.IsZero() {
				since = now
			}
			held = append(held, heldMsg{since: since, retry: want.RetryAt})
		case kvbreaker.Drop:
			st.drops++
		}
	}
	for _, k := range []*Kvbreaker{kv, mir} {
		if err := k.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if c := mir.Cost(); c.Reads != c.FeedReads || mir.Staleness().Served != st.decisions-st.drops {
		mismatch("kvbreaker+mirror read the store %d times and decided %d of %d Allows (%d drops): want no reads but the feed's, every Allow but drops decided from the mirror",
			c.Reads-c.FeedReads, mir.Staleness().Served, st.decisions, st.drops)
	}
	return st
}

// TestSequentialStreamsAgree: on sequential streams kvbreaker, with and
// without a mirror (one process, no delay), agrees with fedify on every
// decision, retry instant and state-change label, and the note's two-field
// model on every decision, on every retry instant while no probe is out,
// and on every label with half-open read as open.
func TestSequentialStreamsAgree(t *testing.T) {
	var total streamStats
	for seed := range uint64(300) {
		st := runStream(t, seed, 400, streamRun{})
		total.add(t, st)
	}
	t.Logf("%d decisions (%d holds, %d probes, %d drops), %d transitions: all equal", total.decisions, total.holds, total.probes, total.drops, total.transitions)
	// The streams must reach every kind of decision for the test to mean
	// anything.
	if total.holds == 0 || total.probes == 0 || total.drops == 0 || total.transitions == 0 {
		t.Fatalf("streams too tame: %+v", total)
	}
}

// TestBackoffStreamsAgree: with recovery back-off on, kvbreaker, with and
// without a mirror, and the two-field model, which learned the rule
// independently, agree on every decision; the two-field model on every
// retry instant while no probe is out and on every label with half-open
// read as open; kvbreaker with a mirror on every retry instant and label.
// Fedify's model has no back-off, so it is not compared.
func TestBackoffStreamsAgree(t *testing.T) {
	var total streamStats
	for seed := range uint64(300) {
		st := runStream(t, 2000+seed, 400, streamRun{backoff: true})
		total.add(t, st)
	}
	t.Logf("%d decisions (%d holds, %d probes, %d drops), %d transitions, back-off up to level %d: all equal",
		total.decisions, total.holds, total.probes, total.drops, total.transitions, total.maxLevel)
	// The cap of RecoveryDelay×100 is reached only after several failed
	// probes in a row (level 5 with factor 3): the streams must get there.
	if total.holds == 0 || total.probes == 0 || total.drops == 0 || total.maxLevel < 5 {
		t.Fatalf("streams too tame: %+v", total)
	}
}

// TestBackoffStreamsNeedTheRule is the negative control of
// TestBackoffStreamsAgree: a two-field model with another factor, or with
// no back-off, disagrees with kvbreaker on some stream.
func TestBackoffStreamsNeedTheRule(t *testing.T) {
	for name, change := range map[string]func(*TwoFieldConfig){
		"other factor": func(c *TwoFieldConfig) {
			if c.RecoveryMultiplier == 3 {
				c.RecoveryMultiplier = 2
			} else {
				c.RecoveryMultiplier = 3
			}
		},
		"no back-off": func(c *TwoFieldConfig) { c.MaxRecoveryDelay, c.RecoveryMultiplier = 0, 0 },
	} {
		caught := 0
		for seed := range uint64(20) {
			for _, m := range runStream(t, 2000+seed, 400, streamRun{backoff: true, twoField: change}).mismatches {
				if strings.Contains(m, "two-field") {
					caught++
				}
			}
		}
		if caught == 0 {
			t.Errorf("%s: the two-field model agreed with kvbreaker on 20 back-off streams", name)
		}
		t.Logf("%s: %d mismatches caught", name, caught)
	}
}

// TestStaleProbeStreamsAgreeWithKvbreaker adds probes that stay unanswered
// past RecoveryDelay (another worker takes them over): kvbreaker still
// agrees with fedify on everything. The two-field model is not held to it:
// the old probe's failure, arriving after the takeover, re-arms its
// restraint where fedify's open circuit ignores it.
func TestStaleProbeStreamsAgreeWithKvbreaker(t *testing.T) {
	stale := 0
	for seed := range uint64(300) {
		st := runStream(t, 1000+seed, 400, streamRun{stale: true})
		stale += st.staleProbes
		for _, m := range st.mismatches {
			if !strings.Contains(m, "two-field") {
				t.Error(m)
			}
		}
	}
	if stale == 0 {
		t.Fatal("no stale probe was taken over")
	}
	t.Logf("%d stale probes taken over", stale)
}

// TestMirrorStreamsNeedOwnWrites is the negative control of the mirror's
// part in TestSequentialStreamsAgree: a mirror that drops the process's own
// writes (they would reach it only through a feed that skips them) answers
// Send on open circuits, and the streams catch it.
func TestMirrorStreamsNeedOwnWrites(t *testing.T) {
	skip := func(o *storeOptions) { o.skipOwn = true }
	caught := 0
	for seed := range uint64(20) {
		for _, m := range runStream(t, seed, 400, streamRun{mirror: []Option{skip}}).mismatches {
			if strings.Contains(m, "kvbreaker+mirror") {
				caught++
			}
		}
	}
	if caught == 0 {
		t.Fatal("a mirror without its own writes agreed with fedify on 20 streams")
	}
	t.Logf("%d mismatches caught", caught)
}

// twoFieldLabel is t as two fields can tell it: half-open is open.
func twoFieldLabel(t Transition) string {
	for _, s := range []*kvbreaker.State{&t.From, &t.To} {
		if *s == kvbreaker.StateHalfOpen {
			*s = kvbreaker.StateOpen
		}
	}
	return t.String()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
