package robustness

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

// The invariants' names, as violations give them.
const (
	InvFailuresOnce = "failures-counted-once"
	InvOneProbe     = "one-probe-per-restraint"
	InvCallTime     = "call-time"
	InvRecovery     = "recovery"
	InvHalfOpen     = "half-open-bound"
	InvLinearizable = "linearizable"
)

// maxPerCheck caps the violations a check lists; the rest are counted.
const maxPerCheck = 5

type checker struct {
	cfg          *Config
	h            *History
	hosts        []hostPlan
	hostName     func(int) string
	atomic       bool
	violations   []error
	inconclusive []string
	allowed      []string
	// lossy holds the store keys on which an acknowledged write was lost.
	lossy map[string]bool
	// lostWrite holds the indices of the lost writes' events.
	lostWrite                              map[int]bool
	lostWrites, lostFailures, secondProbes int
}

func (c *checker) run() {
	c.lost()
	c.failuresOnce()
	if c.atomic {
		c.oneProbe()
	}
	c.callTime()
	c.recovery()
	c.halfOpen()
	c.linearizable()
}

// report adds one violation per finding of inv (up to maxPerCheck, then a
// count).
func (c *checker) report(inv string, found []string) {
	if len(found) == 0 {
		return
	}
	more := ""
	if len(found) > maxPerCheck {
		more = fmt.Sprintf(" (and %d more)", len(found)-maxPerCheck)
		found = found[:maxPerCheck]
	}
	c.violations = append(c.violations, fmt.Errorf("%w: %s (store %s, seed %d): %s%s",
		ErrViolation, inv, c.cfg.Store, c.cfg.Seed, strings.Join(found, "; "), more))
}

// keyed is a finding on one store key (or host), which a store's declared
// loss of acknowledged writes may explain: any finding on a key that lost
// one, or (lost set) a finding that one of the lost writes explains.
type keyed struct {
	key, msg string
	lost     bool
}

// reportKeyed reports findings of inv: those on a key that lost an
// acknowledged write are allowed when the store declares it may, the rest
// are violations.
func (c *checker) reportKeyed(inv string, found []keyed) {
	var strict []string
	for _, f := range found {
		if c.cfg.LosesAckedWrites && (f.lost || c.lossyKey(f.key)) {
			c.allowed = append(c.allowed, inv+": "+f.msg)
			continue
		}
		strict = append(strict, f.msg)
	}
	c.report(inv, strict)
}

// lossyKey reports whether key, a store key or a host (whose store key
// may carry a prefix), lost an acknowledged write.
func (c *checker) lossyKey(key string) bool {
	if key == "" {
		return false
	}
	for k := range c.lossy {
		if k == key || strings.HasSuffix(k, key) {
			return true
		}
	}
	return false
}

// observation is a version a store call found a key at: a Get's, a
// conflict's current one, or the one a successful write created.
type observation struct {
	start, end time.Duration
	ver        driver.Version
	value      []byte // the record, where the call saw it
	write      int    // index of the CAS event that wrote value (-1: a read)
}

// lost measures the acknowledged writes the store lost. A
// compare-and-swap that succeeded (version v) is lost when a call that
// started after it returned found the key at an older version than v:
// versions of a key only grow on every store the harness runs (etcd's
// revisions, Redis's and the memory store's counters), so an older one
// means the write was undone. It is also lost when such a call found the
// key absent although no delete could have come between and no write that
// could have been the key's last can have expired (lostToAbsence). A
// delete that succeeded is lost when such a call found the version it
// removed (versions are never reused). The failure instants a lost write
// held that no later, surviving record holds are the failure counts lost.
func (c *checker) lost() {
	c.lossy = map[string]bool{}
	obs := map[string][]observation{}
	for i, e := range c.h.Events {
		switch {
		case e.Op == OpGet && e.Found:
			obs[e.Key] = append(obs[e.Key], observation{start: e.Start, end: e.End, ver: e.Ver, value: e.Value, write: -1})
		case e.Conflict && e.HasCur && e.CurVer != driver.NoVersion:
			obs[e.Key] = append(obs[e.Key], observation{start: e.Start, end: e.End, ver: e.CurVer, value: e.CurValue, write: -1})
		case e.OK && e.Op == OpCAS:
			// What it wrote, which took effect at some instant between
			// its start and its end: a write answered late (after a WAIT)
			// may have been replaced before its answer came, so it is
			// not a later finding than a write that returned first. (The
			// version a successful write compared is not used: an
			// adapter that recognises its own retried write answers it
			// as done.)
			obs[e.Key] = append(obs[e.Key], observation{start: e.Start, end: e.End, ver: e.Ver, value: e.Value, write: i})
		}
	}
	lostVer := map[string]map[driver.Version]bool{}
	lostSet := map[int]bool{}
	markLost := func(key string, i int) {
		c.lossy[key] = true
		lostSet[i] = true
		if e := c.h.Events[i]; e.Op == OpCAS {
			if lostVer[key] == nil {
				lostVer[key] = map[driver.Version]bool{}
			}
			lostVer[key][e.Ver] = true
		}
	}
	for key, seen := range obs {
		slices.SortFunc(seen, func(a, b observation) int { return int(a.start - b.start) })
		// minAfter[i]: the least version observed from seen[i] on.
		minAfter := make([]driver.Version, len(seen)+1)
		minAfter[len(seen)] = math.MaxUint64
		for i := len(seen) - 1; i >= 0; i-- {
			minAfter[i] = min(minAfter[i+1], seen[i].ver)
		}
		for _, o := range seen {
			j, _ := slices.BinarySearchFunc(seen, o.end+1, func(a observation, t time.Duration) int { return int(a.start - t) })
			if minAfter[j] >= o.ver {
				continue
			}
			// A version seen, then an older one: the key lost a write
			// (acknowledged, or one whose answer was lost but which a
			// read saw).
			c.lossy[key] = true
			if lostVer[key] == nil {
				lostVer[key] = map[driver.Version]bool{}
			}
			lostVer[key][o.ver] = true
			if o.write >= 0 {
				lostSet[o.write] = true
			}
		}
	}
	for _, i := range c.lostToAbsence() {
		markLost(c.h.Events[i].Key, i)
	}
	// Deletes: the version a delete removed, seen after it returned.
	for i, e := range c.h.Events {
		if e.Op != OpCAD || !e.OK {
			continue
		}
		for _, o := range obs[e.Key] {
			if o.write < 0 && o.start > e.End && o.ver == e.Old {
				markLost(e.Key, i)
				break
			}
		}
	}
	lostEvents := slices.Sorted(maps.Keys(lostSet))
	c.lostWrites = len(lostEvents)
	c.lostWrite = map[int]bool{}
	for _, i := range lostEvents {
		c.lostWrite[i] = true
	}
	// The last time a surviving record was seen holding each failure.
	lastHeld := map[string]map[int64]time.Duration{}
	for key, seen := range obs {
		lastHeld[key] = map[int64]time.Duration{}
		for _, o := range seen {
			if o.value == nil || lostVer[key][o.ver] {
				continue
			}
			r, err := record.DecodeRecord(o.value)
			if err != nil {
				continue
			}
			for _, t := range r.Failures {
				lastHeld[key][t.UnixMilli()] = max(lastHeld[key][t.UnixMilli()], o.start)
			}
		}
	}
	counted := map[string]map[int64]bool{}
	for _, i := range lostEvents {
		e := c.h.Events[i]
		if e.Op != OpCAS {
			continue // a lost delete brings failures back, it loses none
		}
		r, err := record.DecodeRecord(e.Value)
		if err != nil {
			continue
		}
		if counted[e.Key] == nil {
			counted[e.Key] = map[int64]bool{}
		}
		for _, t := range r.Failures {
			m := t.UnixMilli()
			if last, ok := lastHeld[e.Key][m]; (!ok || last <= e.End) && !counted[e.Key][m] {
				counted[e.Key][m] = true
				c.lostFailures++
			}
		}
	}
}

// lostToAbsence returns the indices of the acknowledged writes that a
// later call's finding the key absent shows lost. For each call that found
// its key absent (a Get, a delete that found nothing, a conflict whose
// current version is none), the write in question is the last that
// returned before the call started: among the successful writes that did,
// those no other of them started after (they overlap one another), the
// one with the highest version. It is lost only if the absence has no
// other explanation: no delete (whatever it answered: a retried one may
// have applied) could have taken effect between its start and the call's
// end, and every write that could have taken effect in that span (any
// answer, the write itself included) was still within its TTL at the
// call's end by Slack, counting the TTL from the write's start (its
// earliest effect). When unsure, it is not marked.
func (c *checker) lostToAbsence() []int {
	type keyEvents struct{ writes, deletes []int }
	byKey := map[string]*keyEvents{}
	var absent []int
	for i, e := range c.h.Events {
		if e.Op != OpGet && e.Op != OpCAS && e.Op != OpCAD {
			continue
		}
		k := byKey[e.Key]
		if k == nil {
			k = &keyEvents{}
			byKey[e.Key] = k
		}
		switch e.Op {
		case OpCAS:
			k.writes = append(k.writes, i)
		case OpCAD:
			k.deletes = append(k.deletes, i)
		}
		if e.NotFound || (e.Conflict && e.HasCur && e.CurVer == driver.NoVersion) {
			absent = append(absent, i)
		}
	}
	ev := c.h.Events
	// mayFollow reports whether x could have taken effect after w started
	// and before r ended.
	mayFollow := func(x, w, r Event) bool { return (x.Unknown || x.End > w.Start) && x.Start < r.End }
	var lost []int
	for _, ri := range absent {
		r := ev[ri]
		k := byKey[r.Key]
		w, lastStart := -1, time.Duration(-1)
		for _, xi := range k.writes {
			if x := ev[xi]; x.OK && x.End < r.Start {
				lastStart = max(lastStart, x.Start)
			}
		}
		for _, xi := range k.writes {
			if x := ev[xi]; x.OK && x.End < r.Start && x.End >= lastStart && (w < 0 || x.Ver > ev[w].Ver) {
				w = xi
			}
		}
		if w < 0 {
			continue
		}
		explained := false
		for _, di := range k.deletes {
			if di != ri && mayFollow(ev[di], ev[w], r) {
				explained = true
				break
			}
		}
		for _, xi := range k.writes {
			if x := ev[xi]; !explained && (xi == w || mayFollow(x, ev[w], r)) && x.Start+x.TTL <= r.End+c.cfg.Slack {
				explained = true
			}
		}
		if !explained {
			lost = append(lost, w)
		}
	}
	return lost
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }

// written reports whether a store write may have been applied.
func (e *Event) written() bool { return (e.Op == OpCAS || e.Op == OpCAD) && (e.OK || e.Unknown) }

func (c *checker) failuresOnce() {
	owner := map[int64]int{} // failure instant (ms) → index of the Failure call that read it
	for i, e := range c.h.Events {
		if e.Op == OpFailure {
			for _, t := range e.Now {
				owner[t.UnixMilli()] = i
			}
		}
	}
	var found []string
	for _, e := range c.h.Events {
		if e.Op != OpCAS || !e.written() {
			continue
		}
		r, err := record.DecodeRecord(e.Value)
		if err != nil {
			found = append(found, fmt.Sprintf("worker %d wrote an undecodable record to %s at %s: %v", e.Worker, e.Key, ms(e.Start), err))
			continue
		}
		seen := map[int64]bool{}
		byCall := map[int]int64{}
		for _, t := range r.Failures {
			m := t.UnixMilli()
			idx, ok := owner[m]
			switch {
			case seen[m]:
				found = append(found, fmt.Sprintf("the record worker %d wrote to %s at %s holds failure %s twice", e.Worker, e.Key, ms(e.Start), t.Format("15:04:05.000")))
			case !ok:
				found = append(found, fmt.Sprintf("the record worker %d wrote to %s at %s holds failure %s that no Failure call read", e.Worker, e.Key, ms(e.Start), t.Format("15:04:05.000")))
			case byCall[idx] != 0:
				found = append(found, fmt.Sprintf("the record worker %d wrote to %s at %s holds two failures (%d, %d ms) of one Failure call (worker %d at %s)",
					e.Worker, e.Key, ms(e.Start), byCall[idx], m, c.h.Events[idx].Worker, ms(c.h.Events[idx].Start)))
			}
			seen[m] = true
			if ok {
				byCall[idx] = m
			}
		}
	}
	c.report(InvFailuresOnce, found)
}

func (c *checker) oneProbe() {
	rd := c.cfg.Settings.RecoveryDelay
	probes := map[string][]Event{}
	for _, e := range c.h.Events {
		if e.Op == OpAllow && e.Err == "" && e.Decision == "probe" && len(e.Now) > 0 {
			probes[e.Key] = append(probes[e.Key], e)
		}
	}
	var found []keyed
	for host, ps := range probes {
		slices.SortFunc(ps, func(a, b Event) int { return a.Now[0].Compare(b.Now[0]) })
		for i := 1; i < len(ps); i++ {
			if d := ps[i].Now[0].Sub(ps[i-1].Now[0]); d < rd {
				if c.lossyKey(host) {
					c.secondProbes++
				}
				found = append(found, keyed{key: host, msg: fmt.Sprintf("%s: probes by worker %d and worker %d %s apart on the fleet clock (RecoveryDelay %s), at %s and %s",
					host, ps[i-1].Worker, ps[i].Worker, ms(d), ms(rd), ms(ps[i-1].Start), ms(ps[i].Start))})
			}
		}
	}
	c.reportKeyed(InvOneProbe, found)
}

// callTime reports each call longer than its limit, unless stalls of the
// process (History.Stalls) cover its overrun: without them it would have
// ended within the limit, so the load, not the code, decided its length,
// and the call is inconclusive rather than a violation.
func (c *checker) callTime() {
	limit := c.cfg.Settings.CallTimeout + c.cfg.Slack
	var found, stalled []string
	for _, e := range c.h.Events {
		d := e.End - e.Start
		if d <= limit {
			continue
		}
		msg := fmt.Sprintf("worker %d's %s on %s at %s took %s (limit %s)", e.Worker, e.Op, e.Key, ms(e.Start), ms(d), ms(limit))
		if s := c.h.stalled(e.Start, e.End); s >= d-limit {
			stalled = append(stalled, fmt.Sprintf("%s, %s of it with the process stalled", msg, ms(s)))
			continue
		}
		found = append(found, msg)
	}
	c.report(InvCallTime, found)
	if len(stalled) > 0 {
		more := ""
		if len(stalled) > maxPerCheck {
			more = fmt.Sprintf(" (and %d more)", len(stalled)-maxPerCheck)
			stalled = stalled[:maxPerCheck]
		}
		c.inconclusive = append(c.inconclusive, fmt.Sprintf("%s: %s%s", InvCallTime, strings.Join(stalled, "; "), more))
	}
}

// recoveryBound is when, after the heal, every circuit must reflect its
// host's final health: the store settled, an open circuit's restraint
// ended, and one more restraint for a probe whose outcome the settling
// store lost.
func (c *checker) recoveryBound() time.Duration {
	return c.h.Heal + c.cfg.Settle + 2*c.cfg.Settings.RecoveryDelay + c.cfg.Slack
}

func (c *checker) recovery() {
	bound := c.recoveryBound()
	index := map[string]int{}
	for i := range c.hosts {
		index[c.hostName(i)] = i
	}
	answered, made := make([]int, len(c.hosts)), make([]int, len(c.hosts))
	var found, unseen []string
	for _, e := range c.h.Events {
		if e.Op != OpAllow || e.Start < bound {
			continue
		}
		i := index[e.Key]
		made[i]++
		if e.Err != "" {
			continue
		}
		answered[i]++
		switch dead := c.hosts[i].final; {
		case dead && e.Decision == "send":
			found = append(found, fmt.Sprintf("dead host %s sent to by worker %d at %s (bound %s after the heal at %s)", e.Key, e.Worker, ms(e.Start), ms(bound-c.h.Heal), ms(c.h.Heal)))
		case !dead && e.Decision == "hold":
			found = append(found, fmt.Sprintf("healthy host %s held by worker %d at %s (bound %s after the heal at %s)", e.Key, e.Worker, ms(e.Start), ms(bound-c.h.Heal), ms(c.h.Heal)))
		}
	}
	for i, n := range answered {
		switch {
		case made[i] == 0:
			// Nothing to judge: the run ended (a stall of the process can
			// take the whole window) before a worker asked about the host.
			unseen = append(unseen, fmt.Sprintf("no Allow on %s made between %s and the run's end at %s (the process stalled for %s of it)",
				c.hostName(i), ms(bound), ms(c.h.End), ms(c.h.stalled(bound, c.h.End))))
		case n == 0:
			found = append(found, fmt.Sprintf("no Allow on %s answered without error after %s (%d made)", c.hostName(i), ms(bound), made[i]))
		}
	}
	c.report(InvRecovery, found)
	if len(unseen) > 0 {
		c.inconclusive = append(c.inconclusive, InvRecovery+": "+strings.Join(unseen, "; "))
	}
}

// halfOpen follows each key's written records in version order: a
// half-open stretch starts with a probing record after a non-probing one
// (or none) and ends with the next non-probing record or delete, or at a
// write whose outcome is unknown. Once the store is healthy, no stretch
// may last more than RecoveryDelay plus Slack (measured from its start or
// from the store's health, whichever is later, to the start of the write
// that ends it: a lower bound of its true length). Writes the store lost
// are not part of the record's history; a stretch during which one was
// made (a lost delete that closed the circuit, a lost write that ended a
// probe) lasts until a later write ends it, and its finding is allowed
// where the store declares such losses.
func (c *checker) halfOpen() {
	healthy := c.h.Heal + c.cfg.Settle
	limit := c.cfg.Settings.RecoveryDelay + c.cfg.Slack
	type entry struct {
		ver     driver.Version
		del     bool
		probing bool
		e       Event
	}
	byKey := map[string][]entry{}
	unknown := map[string][]Event{}
	lost := map[string][]Event{}
	for i, e := range c.h.Events {
		if c.lostWrite[i] {
			lost[e.Key] = append(lost[e.Key], e)
			continue
		}
		switch {
		case e.Unknown && (e.Op == OpCAS || e.Op == OpCAD):
			unknown[e.Key] = append(unknown[e.Key], e)
		case e.Op == OpCAS && e.OK:
			r, err := record.DecodeRecord(e.Value)
			byKey[e.Key] = append(byKey[e.Key], entry{ver: e.Ver, probing: err == nil && r.Probing, e: e})
		case e.Op == OpCAD && e.OK:
			byKey[e.Key] = append(byKey[e.Key], entry{ver: e.Old, del: true, e: e})
		}
	}
	var found []keyed
	for key, es := range byKey {
		slices.SortFunc(es, func(a, b entry) int {
			if a.ver != b.ver {
				return int(a.ver) - int(b.ver)
			}
			return boolInt(a.del) - boolInt(b.del)
		})
		for i := 0; i < len(es); i++ {
			if !es[i].probing || (i > 0 && es[i-1].probing && !es[i-1].del) {
				continue
			}
			begin := es[i].e
			end, endWhat := c.h.End, "the run's end"
			for j := i + 1; j < len(es); j++ {
				if !es[j].probing || es[j].del {
					end, endWhat = es[j].e.Start, fmt.Sprintf("worker %d's %s", es[j].e.Worker, es[j].e.Op)
					break
				}
			}
			for _, u := range unknown[key] {
				if u.Start > begin.Start && u.Start < end {
					end, endWhat = u.Start, "a write of unknown outcome"
				}
			}
			from := max(begin.End, healthy)
			if end-from > limit {
				lostWithin := slices.ContainsFunc(lost[key], func(l Event) bool { return l.Start >= begin.Start && l.Start < end })
				found = append(found, keyed{lost: lostWithin, msg: fmt.Sprintf("%s half-open from worker %d's claim at %s until %s at %s: %s after the store was healthy (%s), limit RecoveryDelay + slack = %s",
					key, begin.Worker, ms(begin.End), endWhat, ms(end), ms(end-from), ms(healthy), ms(limit))})
			}
		}
	}
	c.reportKeyed(InvHalfOpen, found)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The linearizability check's operations and states on one key.
type (
	linIn struct {
		op         Op
		old        driver.Version
		value      string
		start, end time.Duration
		ttl        time.Duration
	}
	linOut struct {
		unknown, ok, found, notFound, conflict, hasCur bool
		value, curValue                                string
		ver, curVer                                    driver.Version
	}
	// linState is the register: absent, or a value with its version
	// (unknown when written by a call whose answer was lost) that may
	// vanish for an operation ending at or after expiry.
	linState struct {
		present  bool
		value    string
		ver      driver.Version
		verKnown bool
		expiry   time.Duration
	}
)

func (s linState) verIs(v driver.Version) bool { return s.present && (!s.verKnown || s.ver == v) }

func (s linState) holds(value string, ver driver.Version) bool {
	if ver == driver.NoVersion {
		return !s.present
	}
	return s.verIs(ver) && s.value == value
}

func (s linState) known(ver driver.Version) linState {
	s.ver, s.verKnown = ver, true
	return s
}

// matches reports whether the store's precondition (old) holds in s.
func (s linState) matches(old driver.Version) bool {
	if old == driver.NoVersion {
		return !s.present
	}
	return s.verIs(old)
}

// mismatches reports whether a conflict on old is possible in s.
func (s linState) mismatches(old driver.Version) bool {
	if old == driver.NoVersion {
		return s.present
	}
	return !s.present || !s.verKnown || s.ver != old
}

func linStep(st, input, output any) []any {
	s, in, out := st.(linState), input.(linIn), output.(linOut)
	cands := []linState{s}
	if s.present && in.end >= s.expiry {
		cands = append(cands, linState{})
	}
	var next []any
	for _, c := range cands {
		written := linState{present: true, value: in.value, expiry: in.start + in.ttl}
		switch in.op {
		case OpGet:
			if out.found && c.holds(out.value, out.ver) {
				next = append(next, c.known(out.ver))
			} else if out.notFound && !c.present {
				next = append(next, c)
			}
		case OpCAS:
			switch {
			case out.ok:
				if c.matches(in.old) {
					next = append(next, written.known(out.ver))
				}
			case out.conflict:
				if c.mismatches(in.old) && (!out.hasCur || c.holds(out.curValue, out.curVer)) {
					if out.hasCur && out.curVer != driver.NoVersion {
						c = c.known(out.curVer)
					}
					next = append(next, c)
				}
			case out.unknown:
				next = append(next, c)
				if c.matches(in.old) {
					next = append(next, written)
				}
			}
		case OpCAD:
			switch {
			case out.ok:
				if c.matches(in.old) && c.present {
					next = append(next, linState{})
				}
			case out.notFound:
				if !c.present {
					next = append(next, c)
				}
			case out.conflict:
				if c.present && c.mismatches(in.old) {
					next = append(next, c)
				}
			case out.unknown:
				next = append(next, c)
				if c.present && c.matches(in.old) {
					next = append(next, linState{})
				}
			}
		}
	}
	return next
}

var linModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{linState{}} },
	Step: linStep,
	DescribeOperation: func(input, output any) string {
		in, out := input.(linIn), output.(linOut)
		res := "?"
		switch {
		case out.unknown:
			res = "unknown"
		case out.found:
			res = fmt.Sprintf("%x@%d", out.value, out.ver)
		case out.notFound:
			res = "absent"
		case out.ok:
			res = fmt.Sprintf("ok@%d", out.ver)
		case out.conflict:
			res = "conflict"
		}
		switch in.op {
		case OpCAS:
			return fmt.Sprintf("cas(%d, %x) → %s", in.old, in.value, res)
		case OpCAD:
			return fmt.Sprintf("cad(%d) → %s", in.old, res)
		}
		return "get → " + res
	},
}

func (c *checker) linearizable() {
	byKey := map[string][]porcupine.Operation{}
	for _, e := range c.h.Events {
		if e.Op != OpGet && e.Op != OpCAS && e.Op != OpCAD {
			continue
		}
		if e.Op == OpGet && e.Unknown {
			continue // a read that answered nothing changed nothing
		}
		in := linIn{op: e.Op, old: e.Old, value: string(e.Value), start: e.Start, end: e.End, ttl: e.TTL}
		out := linOut{unknown: e.Unknown, ok: e.OK, found: e.Found, notFound: e.NotFound, conflict: e.Conflict,
			hasCur: e.HasCur, curValue: string(e.CurValue), curVer: e.CurVer, ver: e.Ver}
		if e.Op == OpGet {
			out.value = string(e.Value)
		}
		ret := int64(e.End)
		if e.Unknown {
			// Applied at any time after its call, or never.
			ret = math.MaxInt64
			in.end = time.Duration(math.MaxInt64)
		}
		byKey[e.Key] = append(byKey[e.Key], porcupine.Operation{ClientId: e.Worker, Input: in, Output: out, Call: int64(e.Start), Return: ret})
	}
	model := linModel.ToModel()
	var found []keyed
	for key, ops := range byKey {
		res, info := porcupine.CheckOperationsVerbose(model, ops, c.cfg.LinearizeTimeout)
		switch res {
		case porcupine.Illegal:
			msg := fmt.Sprintf("%s: %d operations are not linearizable", key, len(ops))
			if path, err := writeVisualization(c.cfg.HistoryDir, c.h, key, model, info); err == nil {
				msg += "; porcupine's view: " + path
			}
			found = append(found, keyed{key: key, msg: msg})
		case porcupine.Unknown:
			c.inconclusive = append(c.inconclusive, fmt.Sprintf("%s: %s on %s timed out after %s (%d operations)", InvLinearizable, key, c.cfg.Store, c.cfg.LinearizeTimeout, len(ops)))
		}
	}
	c.reportKeyed(InvLinearizable, found)
}
