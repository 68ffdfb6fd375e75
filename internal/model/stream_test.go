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

type heldMsg struct{ since, retry time.Time }

type streamStats struct {
	decisions, holds, probes, drops, transitions, staleProbes int
	mismatches                                                []string
}

// runStream plays one random sequential stream against one host of every
// model: a plain send's outcome is reported before the host's next
// decision; while a probe is in flight, held messages come back at their
// retry instants and new ones arrive (half-open holds). A restrained host
// is asked again by the end of its restraint (its held messages, or new
// traffic, come back then). With stale, a probe may stay unanswered past
// RecoveryDelay, so another worker takes it over. A fourth model,
// kvbreaker deciding from a mirror with no propagation delay, must agree
// with kvbreaker (and so fedify) on everything; mirror adds options to it.
func runStream(t *testing.T, seed uint64, steps int, stale bool, mirror ...Option) (st streamStats) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	fo, so, ks := streamOptions(rng)
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
	mir, err := NewKvbreaker(ks, func() time.Time { return now }, append([]Option{WithMirror(0)}, mirror...)...)
	if err != nil {
		t.Fatal(err)
	}
	models := []Model{fed, sd, kv, mir}
	cfg := fed.Config()
	pOK := []float64{0.05, 0.3, 0.7}[rng.IntN(3)]
	gaps := []time.Duration{0, time.Millisecond, 999 * time.Millisecond, time.Second, 30 * time.Second,
		5 * time.Minute, cfg.FailureWindow - time.Millisecond, cfg.FailureWindow, cfg.FailureWindow + time.Millisecond,
		cfg.RecoveryDelay - time.Millisecond, cfg.RecoveryDelay, cfg.RecoveryDelay + time.Millisecond, 2 * time.Hour}
	lats := []time.Duration{0, time.Millisecond, time.Second, 10 * time.Second}
	if stale {
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
		for i := range models {
			if trs[i].Changed() && i == 0 {
				st.transitions++
			}
			if i >= 2 && trs[i] != trs[0] {
				mismatch("%s at %v: %s reported %s, fedify %s", what, now.Sub(t0), models[i].Name(), trs[i], trs[0])
			}
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
	}
	for range steps {
		// The next event: a probe's outcome, a held message's retry, or
		// an arrival, whichever comes first.
		next := now.Add(gaps[rng.IntN(len(gaps))])
		if rec, ok := fed.Record("h", now); ok && rec.State != kvbreaker.StateClosed && len(held) == 0 {
			end := rec.Opened.Add(cfg.RecoveryDelay)
			if rec.State == kvbreaker.StateHalfOpen {
				end = rec.HalfOpened.Add(cfg.RecoveryDelay)
			}
			if next.After(end) {
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
		ref := vs[0]
		for i, m := range models[1:] {
			if vs[i+1].Decision != ref.Decision {
				mismatch("allow at %v (held since %v): %s decided %v, fedify %v", now.Sub(t0), since, m.Name(), vs[i+1].Decision, ref.Decision)
			}
		}
		for _, i := range []int{2, 3} {
			if ref.Decision == kvbreaker.Hold && !vs[i].RetryAt.Equal(ref.RetryAt) {
				mismatch("allow at %v: %s retries at %v, fedify at %v", now.Sub(t0), models[i].Name(), vs[i].RetryAt.Sub(t0), ref.RetryAt.Sub(t0))
			}
		}
		labels("allow")
		switch ref.Decision {
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
			held = append(held, heldMsg{since: since, retry: ref.RetryAt})
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
// model on every decision.
func TestSequentialStreamsAgree(t *testing.T) {
	var total streamStats
	for seed := range uint64(300) {
		st := runStream(t, seed, 400, false)
		for _, m := range st.mismatches {
			t.Error(m)
		}
		total.decisions += st.decisions
		total.holds += st.holds
		total.probes += st.probes
		total.drops += st.drops
		total.transitions += st.transitions
	}
	t.Logf("%d decisions (%d holds, %d probes, %d drops), %d transitions: all equal", total.decisions, total.holds, total.probes, total.drops, total.transitions)
	// The streams must reach every kind of decision for the test to mean
	// anything.
	if total.holds == 0 || total.probes == 0 || total.drops == 0 || total.transitions == 0 {
		t.Fatalf("streams too tame: %+v", total)
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
		st := runStream(t, 1000+seed, 400, true)
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
		for _, m := range runStream(t, seed, 400, false, skip).mismatches {
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

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
