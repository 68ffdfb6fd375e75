package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/conformcheck"

	"github.com/kvbreaker/kvbreaker/internal/output"
)

// checkOutput is check's report, as JSON and as the table. Durations are
// milliseconds (the unit is in each field's name); null means not
// applicable or not measured.
type checkOutput struct {
	Backend     string       `json:"backend"`
	Target      string       `json:"target"`
	Prefix      string       `json:"prefix"`
	Quick       bool         `json:"quick"`
	TimedOut    bool         `json:"timed_out"`
	WallMS      float64      `json:"wall_ms"`
	Declared    declaredJSON `json:"declared"`
	Promises    []promiseRow `json:"promises"`
	RoundTrips  []roundTrip  `json:"round_trips"`
	Margin      marginJSON   `json:"ttl_margin"`
	Expiry      *expiryJSON  `json:"expiry"`
	StalenessMS *float64     `json:"read_staleness_ms"`
	Clock       *clockJSON   `json:"clock"`
	Cases       []caseJSON   `json:"cases"`
	// Broken lists every violation: the case, the promise it breaks, and
	// what was seen (prose, in "detail").
	Broken []problemJSON `json:"broken"`
	// NotVerified lists what the run could not check (a pass says nothing
	// about it): the case, the promise, why in "message", and for a
	// promise a Breaker relies on the waiver a conformance harness would
	// need to pass without verifying it, and what that waiver accepts.
	// check cannot verify these on a live store (it cannot advance the
	// store's clock or read its lifetimes) and does not fail for them.
	NotVerified []noteJSON  `json:"not_verified"`
	Cleanup     cleanupJSON `json:"cleanup"`
	OK          bool        `json:"ok"`
}

type declaredJSON struct {
	Atomic             bool    `json:"atomic"`
	ExpiryKind         string  `json:"expiry_kind"`
	GranularityMS      float64 `json:"granularity_ms"`
	MinTTLMS           float64 `json:"min_ttl_ms"`
	EarlyMS            float64 `json:"early_ms"`
	LateMS             float64 `json:"late_ms"`
	ReadStalenessMS    float64 `json:"read_staleness_ms"`
	MinWriteIntervalMS float64 `json:"min_write_interval_ms"`
}

// Promise row IDs (stable; the table shows their label).
const (
	rowCAS       = "compare-and-swap"
	rowNotEarly  = "expiry-not-early"
	rowNotLate   = "expiry-not-late"
	rowAbsent    = "expired-counts-as-absent"
	rowStaleness = "read-staleness"
	rowFleet     = "breakers-share-one-circuit"
)

// Promise row results.
const (
	resultOK          = "ok"
	resultBroken      = "broken"
	resultNotRun      = "not_run"
	resultNotPromised = "not_promised"
)

// promiseRow is one line of the promise table.
type promiseRow struct {
	Promise string `json:"promise"`
	// Result is ok, broken, not_run or not_promised.
	Result string `json:"result"`
	// DeclaredMS is the declared bound, MeasuredMS what was seen; null when
	// the promise is not a duration or was not measured.
	DeclaredMS *float64 `json:"declared_ms"`
	MeasuredMS *float64 `json:"measured_ms"`
	// CasesHeld of CasesRun (compare-and-swap only, else null).
	CasesHeld *int `json:"cases_held"`
	CasesRun  *int `json:"cases_run"`

	// The table's words.
	label, declared, measured string
}

type roundTrip struct {
	Op    string  `json:"op"`
	N     int     `json:"n"`
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
}

type marginJSON struct {
	ClockSkewMS     float64 `json:"clock_skew_ms"`
	NeededMS        float64 `json:"needed_ms"`
	DeclaredModelMS float64 `json:"declared_model_ms"`
}

// caseJSON is one conformance case's outcome, from its structured result.
type caseJSON struct {
	Case    conformance.CaseID    `json:"case"`
	Promise conformance.PromiseID `json:"promise"`
	// Kind is store (the case calls the store) or declaration (it checks
	// the declared traits in simulation).
	Kind string `json:"kind"`
	// Status is pass, fail, skip or inconclusive.
	Status string `json:"status"`
	// SkipReason is quick, not_promised, unreachable or other; null when
	// the case ran.
	SkipReason *string       `json:"skip_reason"`
	Problems   []problemJSON `json:"problems"`
	// Message is the skip or inconclusive reason in words, or null.
	Message     *string  `json:"message"`
	Notes       []string `json:"notes"`
	NotVerified []string `json:"not_verified"`
}

type problemJSON struct {
	Case    conformance.CaseID    `json:"case"`
	Promise conformance.PromiseID `json:"promise"`
	Detail  string                `json:"detail"`
}

type noteJSON struct {
	Case    conformance.CaseID    `json:"case"`
	Promise conformance.PromiseID `json:"promise"`
	Message string                `json:"message"`
	// Waiver is the conformance.Waive call that would accept the promise
	// unverified, and WaiverMeaning what it accepts; null for a promise a
	// Breaker does not rely on.
	Waiver        *string `json:"waiver"`
	WaiverMeaning *string `json:"waiver_meaning"`
}

// gapNote is one thing a case could not verify.
func gapNote(c string, g conformcheck.Gap) noteJSON {
	n := noteJSON{Case: conformance.CaseID(c), Promise: conformance.PromiseID(g.Promise), Message: g.Detail}
	if g.Waive != "" {
		n.Waiver, n.WaiverMeaning = strp(g.Waive), strp(g.Meaning)
	}
	return n
}

// cleanupJSON is what check removed of what it wrote: Deleted the keys
// that still held a record, Purged the tombstones and expired entries
// (conn.purge) removed after, Left the keys it could not
// remove.
type cleanupJSON struct {
	Deleted int `json:"deleted"`
	Purged  int `json:"purged"`
	Left    int `json:"left"`
}

// expiryJSON is what the expiry case observed: the entry vanished between
// VanishedMin and VanishedMax after its write.
type expiryJSON struct {
	TTLMS          float64 `json:"ttl_ms"`
	EffectiveTTLMS float64 `json:"effective_ttl_ms"`
	VanishedMinMS  float64 `json:"vanished_min_ms"`
	VanishedMaxMS  float64 `json:"vanished_max_ms"`
	EarlyMS        float64 `json:"early_ms"`
	LateMS         float64 `json:"late_ms"`
	ClockAdvanced  bool    `json:"clock_advanced"`
}

func msp(d time.Duration) *float64 { v := output.Ms(d); return &v }

func strp(s string) *string { return &s }

func intp(n int) *int { return &n }

// fromMS is the inverse of ms, for the table.
func fromMS(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// skip reasons.
const (
	skipQuick       = "quick"
	skipNotPromised = "not_promised"
	skipUnreachable = "unreachable"
	skipOther       = "other"
)

func newCheckOutput(rep *conformcheck.Report, f *checkFlags, c *conn, prefix string, elapsed time.Duration, timedOut bool, deleted, purged, left int) *checkOutput {
	t := rep.Traits
	m := t.Expiry
	o := &checkOutput{
		Backend: f.bf.backend, Target: c.describe, Prefix: prefix, Quick: f.quick, TimedOut: timedOut,
		WallMS: output.Ms(elapsed),
		Declared: declaredJSON{
			Atomic: t.Atomic, ExpiryKind: m.Kind.String(), GranularityMS: output.Ms(m.Granularity),
			MinTTLMS: output.Ms(m.MinTTL), EarlyMS: output.Ms(m.Early), LateMS: output.Ms(m.Late),
			ReadStalenessMS: output.Ms(t.ReadStaleness), MinWriteIntervalMS: output.Ms(t.MinWriteInterval),
		},
		Cleanup:     cleanupJSON{deleted, purged, left},
		Broken:      []problemJSON{},
		NotVerified: []noteJSON{},
		Cases:       []caseJSON{},
		RoundTrips:  []roundTrip{},
	}
	unreachable := false
	byID := map[conformance.CaseID]*conformcheck.Result{}
	for i := range rep.Results {
		r := &rep.Results[i]
		byID[conformance.CaseID(r.Case)] = r
		if r.Case == "reachable" && len(r.Problems) > 0 {
			unreachable = true
		}
	}
	for i := range rep.Results {
		r := &rep.Results[i]
		id, promise := conformance.CaseID(r.Case), conformance.PromiseID(r.Promise)
		cj := caseJSON{Case: id, Promise: promise, Kind: r.Kind.String(), Status: "pass",
			Problems: []problemJSON{}, Notes: nonNil(r.Notes), NotVerified: []string{}}
		for _, g := range r.NotVerified {
			cj.NotVerified = append(cj.NotVerified, g.Detail)
		}
		switch {
		case r.Skipped != "":
			cj.Status = "skip"
			cj.Message = strp(r.Skipped)
			switch {
			case r.NotPromised:
				cj.SkipReason = strp(skipNotPromised)
			case unreachable:
				cj.SkipReason = strp(skipUnreachable)
			case f.quick:
				cj.SkipReason = strp(skipQuick)
			default:
				cj.SkipReason = strp(skipOther)
			}
			if !r.NotPromised {
				o.NotVerified = append(o.NotVerified, noteJSON{Case: id, Promise: promise, Message: r.Skipped})
			}
		case len(r.Problems) > 0:
			cj.Status = "fail"
		case r.Inconclusive != "":
			cj.Status = "inconclusive"
			cj.Message = strp(r.Inconclusive)
			o.NotVerified = append(o.NotVerified, noteJSON{Case: id, Promise: promise, Message: "inconclusive: " + r.Inconclusive})
		}
		for _, p := range r.Problems {
			pj := problemJSON{Case: id, Promise: promise, Detail: p.Error()}
			if pr, ok := errors.AsType[*conformance.Problem](p); ok {
				pj.Promise, pj.Detail = pr.Promise, pr.Detail
			}
			cj.Problems = append(cj.Problems, pj)
			o.Broken = append(o.Broken, pj)
		}
		for _, g := range r.NotVerified {
			o.NotVerified = append(o.NotVerified, gapNote(r.Case, g))
		}
		o.Cases = append(o.Cases, cj)
	}

	// status of a case: broken if one of its problems breaks one of
	// promises (any problem when none is given).
	status := func(id conformance.CaseID, promises ...conformance.PromiseID) string {
		r, ok := byID[id]
		if !ok || r.Skipped != "" {
			return resultNotRun
		}
		if len(promises) == 0 && len(r.Problems) > 0 {
			return resultBroken
		}
		for _, p := range promises {
			if r.Broke(p) {
				return resultBroken
			}
		}
		return resultOK
	}

	// Compare-and-swap: every case that checks a real compare.
	cas := promiseRow{Promise: rowCAS, label: "compare-and-swap", declared: "atomic"}
	if !t.Atomic {
		cas.declared, cas.measured, cas.Result = "last writer wins", "-", resultNotPromised
	} else {
		ran, failed := 0, 0
		for i := range rep.Results {
			r := &rep.Results[i]
			if !r.NeedsAtomic || r.Skipped != "" {
				continue
			}
			switch {
			case len(r.Problems) > 0:
				ran++
				failed++
			case len(r.NotVerified) == 0 && r.Inconclusive == "":
				// A case that could check nothing here (no way to lose
				// an answer) has not held anything.
				ran++
			}
		}
		cas.CasesHeld, cas.CasesRun = intp(ran-failed), intp(ran)
		cas.measured = fmt.Sprintf("%d of %d cases held", ran-failed, ran)
		switch {
		case failed > 0:
			cas.Result = resultBroken
		case ran == 0:
			cas.Result = resultNotRun
		default:
			cas.Result = resultOK
		}
	}
	o.Promises = append(o.Promises, cas)

	// Expiry.
	early := promiseRow{Promise: rowNotEarly, label: "expiry: not early", DeclaredMS: msp(m.Early + m.Granularity),
		declared: fmt.Sprintf("<= %v early", m.Early+m.Granularity), measured: "-",
		Result: status("expiry", "expiry-not-early")}
	late := promiseRow{Promise: rowNotLate, label: "expiry: not late", DeclaredMS: msp(lateBound(m)),
		declared: fmt.Sprintf("<= %v late", lateBound(m)), measured: "-",
		Result: status("expiry", "expiry-not-late")}
	if e := rep.Expiry; e != nil {
		how := "waited"
		if e.Advanced {
			how = "clock advanced"
		}
		o.Expiry = &expiryJSON{output.Ms(e.TTL), output.Ms(e.Effective), output.Ms(e.Min), output.Ms(e.Max), output.Ms(e.Early), output.Ms(e.Late), e.Advanced}
		early.MeasuredMS, late.MeasuredMS = msp(e.Early), msp(e.Late)
		early.measured = fmt.Sprintf("%v early (ttl %v, %s)", e.Early.Round(time.Millisecond), e.Effective, how)
		late.measured = fmt.Sprintf("%v late", e.Late.Round(time.Millisecond))
	} else if f.quick && early.Result == resultNotRun {
		early.measured, late.measured = "skipped (--quick)", "skipped (--quick)"
	}
	o.Promises = append(o.Promises, early, late)

	absent := promiseRow{Promise: rowAbsent, label: "expired counts as absent", declared: "Get, CAS, delete", measured: "-",
		Result: status("expired-counts-as-absent")}
	if absent.Result == resultOK {
		absent.measured = "yes"
	}
	o.Promises = append(o.Promises, absent)

	stale := promiseRow{Promise: rowStaleness, label: "read staleness", DeclaredMS: msp(t.ReadStaleness),
		declared: fmt.Sprintf("<= %v", t.ReadStaleness), measured: "-", Result: status("read-staleness")}
	if t.ReadStaleness == 0 {
		stale.declared = "0 (linearizable)"
	}
	if rep.StalenessMeasured {
		stale.MeasuredMS = msp(rep.Staleness)
		o.StalenessMS = msp(rep.Staleness)
		stale.measured = rep.Staleness.Round(time.Millisecond).String()
	}
	o.Promises = append(o.Promises, stale)

	fleet := promiseRow{Promise: rowFleet, label: "breakers share one circuit", declared: "open, hold, one probe", measured: "-",
		Result: status("breaker-fleet")}
	if fleet.Result == resultOK {
		fleet.measured = "yes"
	}
	o.Promises = append(o.Promises, fleet)

	for _, rt := range rep.RoundTrips() {
		o.RoundTrips = append(o.RoundTrips, roundTrip{Op: rt.Op, N: rt.N, P50MS: output.Ms(rt.P50), P99MS: output.Ms(rt.P99)})
	}
	skew := f.bf.clockSkew
	o.Margin = marginJSON{ClockSkewMS: output.Ms(skew), NeededMS: output.Ms(rep.TTLMarginFor(skew)), DeclaredModelMS: output.Ms(m.RequiredMargin(skew))}
	o.OK = len(o.Broken) == 0 && !timedOut
	for _, c := range o.Cases {
		// An inconclusive check has not passed: run check again.
		o.OK = o.OK && c.Status != "inconclusive"
	}
	return o
}

// setClock adds the clock measurement; an offset proven beyond
// --clock-skew fails the check.
func (o *checkOutput) setClock(c *clockJSON) {
	o.Clock = c
	if c.Result == clockExceeds {
		o.OK = false
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// lateBound is how late the declared model lets an entry vanish (as the
// conformance suite reads it: reader-filtered reads drop an entry on time
// however late the backend deletes it).
func lateBound(m driver.ExpiryModel) time.Duration {
	if m.Kind == driver.ExpiryRelative {
		return m.Late + m.Granularity
	}
	return m.Granularity
}
