package sim

import (
	"runtime"
	"sync"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/internal/model"
)

// A lane runs some of the models on the calls the runner makes. Only the
// reference decides what happens next (its verdicts drive the trace); every
// other model only answers the same calls and is compared with it. So the
// runner answers the reference itself and passes each call, with the
// reference's answer, to the lanes: its own (the reference and the models
// it keeps) at once, a follower lane on its own goroutine, in batches.
// Each model sees the very calls, in the same order and at the same
// instants, as in a sequential run, and touches only its own entries of the
// shared per-model slices (reports, v, tr, a host's owed, lost and exp), so
// the report is the same however the models are laid out in lanes.
type lane struct {
	r   *runner
	idx []int // the models this lane runs, by index in r.models
	now int64 // the lane's simulated instant (ms): its models' clock
	// t is clock's answer at tAt, once tSet.
	t     time.Time
	tAt   int64
	tSet  bool
	procs []processor
	// Follower lanes only: batches of calls in, used batches back.
	in, free chan []call
	done     sync.WaitGroup
	batch    []call
}

// callKind is what a call asks of the lane's models.
type callKind int8

const (
	callAllow callKind = iota
	callOutcome
	callSample // traffic: expiries checked, records counted for the peak
	callQuiet  // after the quiet time: records left
)

// call is one call of the runner with what the lanes need of the
// reference's answer to it.
type call struct {
	kind      callKind
	ok        bool // callOutcome: a success
	down      bool // callAllow: the host is unreachable now
	refLost   bool // the reference's restrained record at h had expired
	proc      int
	now       int64
	h         *host
	heldSince time.Time
	ref       model.Verdict    // callAllow: the reference's verdict
	refTr     model.Transition // the reference's state change
	lostHosts []*host          // callSample: where the reference's record had expired
}

// laneBatch is the calls a follower lane gets at once: enough to make the
// hand-over cheap beside the models' work.
const laneBatch = 2048

// clock is the lane's models' clock: l.now as a time, converted once per
// instant (a Breaker reads its clock several times a call).
func (l *lane) clock() time.Time {
	if !l.tSet || l.tAt != l.now {
		l.t, l.tAt, l.tSet = Epoch.Add(time.Duration(l.now)*time.Millisecond), l.now, true
	}
	return l.t
}

// followers is how many follower lanes a run uses: none when a hook must
// see every model after each call (AfterEvent), when the models are few
// (Replay), or on one core; else one per core beyond the first, at most
// one per kvbreaker variant but the first, which the runner keeps.
func (r *runner) followers(variants int) int {
	switch {
	case r.s.lanes < 0, r.s.AfterEvent != nil, r.replay:
		return 0
	case r.s.lanes > 0:
		return min(r.s.lanes, variants-1)
	}
	return max(min(runtime.GOMAXPROCS(0)-1, variants-1), 0)
}

// start runs l's models on their own goroutine.
func (l *lane) start() {
	l.in, l.free = make(chan []call, 2), make(chan []call, 3)
	for range 3 {
		l.free <- make([]call, 0, laneBatch)
	}
	l.batch = <-l.free
	l.done.Go(func() {
		for b := range l.in {
			for i := range b {
				l.apply(&b[i])
				b[i] = call{}
			}
			l.free <- b[:0]
		}
	})
}

// send passes c to l: at once on the runner's lane, in order on a
// follower's.
func (l *lane) send(c call) {
	if l.in == nil {
		l.apply(&c)
		return
	}
	l.batch = append(l.batch, c)
	if len(l.batch) == cap(l.batch) {
		l.in <- l.batch
		l.batch = <-l.free
	}
}

// wait ends a follower lane once it has answered every call.
func (l *lane) wait() {
	if l.in == nil {
		return
	}
	l.in <- l.batch
	close(l.in)
	l.done.Wait()
}

func (l *lane) apply(c *call) {
	l.now = c.now
	for _, p := range l.procs {
		p.UseProcess(c.proc)
	}
	r, now := l.r, l.clock()
	switch c.kind {
	case callAllow:
		l.allow(c, now)
	case callOutcome:
		l.outcome(c, now)
	case callSample, callQuiet:
		for _, h := range c.lostHosts {
			for _, i := range l.idx {
				h.lost[i] = true
			}
		}
		for _, i := range l.idx {
			if i == 0 {
				continue // counted by the runner
			}
			n := 0
			for _, h := range r.hosts {
				if c.kind == callSample {
					r.checkExpiry(h, i, now)
				}
				if r.models[i].Live(h.name, now) {
					n++
				}
			}
			if c.kind == callSample {
				r.reports[i].PeakRecords = max(r.reports[i].PeakRecords, n)
			} else {
				r.reports[i].RecordsLeftAfterQuiet = n
			}
		}
	}
}

// lose marks h lost for l's models if the reference's record had expired.
func (l *lane) lose(c *call) {
	if c.refLost {
		for _, i := range l.idx {
			c.h.lost[i] = true
		}
	}
}

// allow asks l's models about a delivery to c.h and compares their
// answers with the reference's.
func (l *lane) allow(c *call, now time.Time) {
	r, h := l.r, c.h
	l.lose(c)
	for _, i := range l.idx {
		if i == 0 {
			r.v[0], r.tr[0] = c.ref, c.refTr
			continue
		}
		r.checkExpiry(h, i, now)
		r.v[i], r.tr[i] = r.models[i].Allow(h.name, now, c.heldSince)
	}
	for _, i := range l.idx {
		h.exp[i].after(r.models[i], h.name, now, opAllow, r.v[i].Decision, r.tr[i], &r.reports[i].ExpiryEffects)
	}
	ref := c.ref
	for _, i := range l.idx {
		rep, v := &r.reports[i], r.v[i]
		rep.Decisions++
		switch {
		case v.Decision == ref.Decision:
			rep.agree++
			if v.Decision == kvbreaker.Hold && !v.RetryAt.Equal(ref.RetryAt) {
				rep.RetryMismatches++
			}
		case h.lost[i]:
			rep.AfterRecordLoss++
			if delivers(v.Decision) && !delivers(ref.Decision) {
				rep.AfterRecordLossUnsafe++
			}
		case v.Decision == kvbreaker.Probe && ref.Decision == kvbreaker.Hold && h.owed[i]:
			// The reference probed at an earlier decision this model
			// held; this is that single probe, taken later, while the
			// reference's own probe is still in flight.
			rep.LateProbes++
		case delivers(v.Decision) && !delivers(ref.Decision):
			rep.UnsafeDivergences++
		case !delivers(v.Decision) && delivers(ref.Decision):
			rep.SafeDivergences++
		default:
			rep.SendProbeSwaps++
		}
		switch {
		case ref.Decision == kvbreaker.Probe && !delivers(v.Decision):
			h.owed[i] = true
		case v.Decision == kvbreaker.Probe, ref.Decision == kvbreaker.Send:
			h.owed[i] = false
		}
		if delivers(v.Decision) && c.down {
			rep.SendsToDownHosts++
		}
		switch v.Decision {
		case kvbreaker.Probe:
			rep.Probes++
		case kvbreaker.Drop:
			rep.Drops++
		}
	}
	l.transitions(c)
}

// outcome tells l's models that a delivery to c.h succeeded or failed.
func (l *lane) outcome(c *call, now time.Time) {
	r, h := l.r, c.h
	o := opFailure
	if c.ok {
		o = opSuccess
	}
	l.lose(c)
	for _, i := range l.idx {
		switch {
		case i == 0:
			r.tr[0] = c.refTr
			continue
		case c.ok:
			r.checkExpiry(h, i, now)
			r.tr[i] = r.models[i].Success(h.name, now)
		default:
			r.checkExpiry(h, i, now)
			r.tr[i] = r.models[i].Failure(h.name, now)
		}
	}
	for _, i := range l.idx {
		h.exp[i].after(r.models[i], h.name, now, o, 0, r.tr[i], &r.reports[i].ExpiryEffects)
	}
	l.transitions(c)
	for _, i := range l.idx {
		// An outcome can change either side's restraint: stop excusing.
		h.owed[i] = false
		if c.ok {
			// Every model deleted its record: they are in step again.
			h.lost[i] = false
		}
	}
}

func (l *lane) transitions(c *call) {
	r := l.r
	for _, i := range l.idx {
		if r.tr[i].Changed() {
			r.reports[i].Transitions++
		}
		if r.tr[i] != c.refTr {
			r.reports[i].TransitionMismatches++
		}
	}
}
