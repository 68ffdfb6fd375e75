package conformcheck

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// Kind says what a case checks.
type Kind int8

const (
	// KindStore cases call the store, directly or through Breakers over
	// it: a failure is the adapter's (or its declaration's, measured
	// against it).
	KindStore Kind = iota
	// KindDeclaration cases never call the store: they check that the
	// declared Traits and kvbreaker's TTL margin fit together, in
	// simulation. A pass says nothing about the adapter.
	KindDeclaration
)

// String returns "store" or "declaration".
func (k Kind) String() string {
	switch k {
	case KindStore:
		return "store"
	case KindDeclaration:
		return "declaration"
	}
	return fmt.Sprintf("Kind(%d)", int8(k))
}

// Gap is something a case could not verify about a promise, and what that
// means for the run.
type Gap struct {
	// Promise is the conformance.PromiseID left unverified; PromiseText
	// says it in words.
	Promise, PromiseText string
	// Detail is what was not checked, and why (a missing harness
	// capability, -short).
	Detail string
	// ReliedOn: a Breaker relies on the promise, so Run and Check fail
	// while it is unverified, unless it is waived or excused.
	ReliedOn bool
	// Waived is the reason the harness gave in conformance.Waive, or "".
	Waived string
	// Excused says why the gap does not fail this run even so (the run
	// skips real-time waits; a measurement could not decide), or "".
	Excused string
	// Waive is the call that would waive the promise
	// (conformance.Waive("state-ttl", "…")), and Meaning
	// what the waiver would accept; empty for a promise not relied on.
	Waive, Meaning string
}

// Blocks reports whether the gap fails Run and Check: a promise a Breaker
// relies on, neither waived nor excused.
func (g Gap) Blocks() bool { return g.ReliedOn && g.Waived == "" && g.Excused == "" }

// Result is one case's outcome.
type Result struct {
	// Case is the case's conformance.CaseID (the subtest name under Run).
	Case string
	// Promise is the conformance.PromiseID the case checks (PromiseText
	// in words); each of Problems names the one it breaks, which may be
	// another the case relies on.
	Promise, PromiseText string
	// Kind says whether the case calls the store or checks the declared
	// Traits in simulation without touching it.
	Kind Kind
	// NeedsAtomic: the case checks a real compare, so a store declaring
	// Traits().Atomic == false skips it (see NotPromised).
	NeedsAtomic bool
	// Skipped says why the case did not run; empty when it ran.
	Skipped string
	// NotPromised: skipped because the store does not make the promise
	// (Atomic == false, or no driver.ClockSampler for the clock-sampler
	// case), so the skip is not something left unverified.
	NotPromised bool
	// Problems are the violations found, each a *conformance.Problem
	// wrapping the PromiseID it breaks.
	Problems []error
	// Notes are measurements and observations worth reporting.
	Notes []string
	// NotVerified lists what the case could not check: a pass says
	// nothing about these.
	NotVerified []Gap
	// Inconclusive says why the case's check could not decide (a
	// linearizability search that timed out, even when retried).
	Inconclusive string
}

// Passed reports whether the case ran, decided, found nothing wrong, and
// verified everything it checks: a case that left something unverified,
// waived or not, has not passed.
func (r *Result) Passed() bool {
	return r.Skipped == "" && len(r.Problems) == 0 && r.Inconclusive == "" && len(r.NotVerified) == 0
}

// Broke reports whether one of the case's problems breaks promise (a
// conformance.PromiseID).
func (r *Result) Broke(promise error) bool {
	for _, p := range r.Problems {
		if errors.Is(p, promise) {
			return true
		}
	}
	return false
}

// Status is the case's verdict as reports print it: SKIP, FAIL,
// INCONCLUSIVE, NOT VERIFIED (something unverified and not waived),
// WAIVED (everything unverified was waived) or PASS.
func (r *Result) Status() string {
	switch {
	case r.Skipped != "":
		return "SKIP"
	case len(r.Problems) > 0:
		return "FAIL"
	case r.Inconclusive != "":
		return "INCONCLUSIVE"
	}
	waived := 0
	for _, g := range r.NotVerified {
		if g.Waived == "" {
			return "NOT VERIFIED"
		}
		waived++
	}
	if waived > 0 {
		return "WAIVED"
	}
	return "PASS"
}

// ExpiryMeasurement is what the expiry case observed for one entry.
type ExpiryMeasurement struct {
	// TTL is the TTL written; Effective is max(TTL, MinTTL).
	TTL, Effective time.Duration
	// The entry was first seen absent between Min (last seen present) and
	// Max (first seen absent) after the write, as the write's and the
	// reads' round trips allow.
	Min, Max time.Duration
	// Early and Late are how far Max fell before, and Min after, the
	// Effective TTL (zero when on time).
	Early, Late time.Duration
	// Advanced: the backend clock was advanced (TimeAdvancer) rather than
	// waited for.
	Advanced bool
}

// RoundTrip summarises one operation's round-trip times.
type RoundTrip struct {
	Op       string
	N        int
	P50, P99 time.Duration
}

// Report is what a run found: per-case results and measurements.
type Report struct {
	// Traits are what the store declared.
	Traits driver.Traits
	// Options are the options the suite ran with, defaults applied.
	Options Options

	mu      sync.Mutex
	Results []Result
	order   []int // each result's place in the case table
	// Expiry is set when the expiry case ran.
	Expiry *ExpiryMeasurement
	// Staleness is the longest a completed write stayed invisible to Get;
	// StalenessMeasured says the staleness case ran.
	Staleness         time.Duration
	StalenessMeasured bool
	rtt               map[string][]time.Duration
}

// NewReport is an empty report of a run over a store declaring t.
func NewReport(t driver.Traits, o Options) *Report {
	return &Report{Traits: t, Options: o, rtt: make(map[string][]time.Duration)}
}

// Add records res, the result of the case at index i of the table, in
// table order (cases that wait in real time finish out of order).
func (r *Report) Add(i int, res Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, _ := slices.BinarySearch(r.order, i)
	r.order = slices.Insert(r.order, at, i)
	r.Results = slices.Insert(r.Results, at, res)
}

// AddRoundTrip records one call's round trip.
func (r *Report) AddRoundTrip(op string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rtt[op] = append(r.rtt[op], d)
}

// SetExpiry records the expiry case's measurement.
func (r *Report) SetExpiry(m ExpiryMeasurement) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Expiry = &m
}

// SetStaleness records a read staleness seen; the report keeps the worst.
func (r *Report) SetStaleness(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.StalenessMeasured = true
	r.Staleness = max(r.Staleness, d)
}

// results is a copy of the results, for reading without the lock.
func (r *Report) results() []Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.Results)
}

// NotVerified lists every promise the run did not verify and did not
// waive: cases skipped (with why), checks a case could not make, and
// inconclusive cases. Empty means everything the suite knows to check was
// checked or waived.
func (r *Report) NotVerified() []string {
	var out []string
	for _, res := range r.results() {
		if res.Skipped != "" && !res.NotPromised {
			out = append(out, fmt.Sprintf("%s (%s): %s", res.Case, res.PromiseText, res.Skipped))
		}
		for _, g := range res.NotVerified {
			if g.Waived == "" {
				out = append(out, res.Case+": "+g.Detail)
			}
		}
		if res.Inconclusive != "" {
			out = append(out, fmt.Sprintf("%s (%s): inconclusive: %s", res.Case, res.PromiseText, res.Inconclusive))
		}
	}
	return out
}

// Blocking returns the gaps that fail Run and Check (Gap.Blocks), with the
// case each is in.
func (r *Report) Blocking() (cases []string, gaps []Gap) {
	for _, res := range r.results() {
		for _, g := range res.NotVerified {
			if g.Blocks() {
				cases, gaps = append(cases, res.Case), append(gaps, g)
			}
		}
	}
	return cases, gaps
}

// UnusedWaivers returns the waivers no gap of the run needed: the promise
// was verified (or its cases did not run).
func (r *Report) UnusedWaivers() []Waiver {
	used := map[string]bool{}
	for _, res := range r.results() {
		for _, g := range res.NotVerified {
			if g.Waived != "" {
				used[g.Promise] = true
			}
		}
	}
	var out []Waiver
	for _, w := range r.Options.Waivers {
		if !used[w.Promise] {
			out = append(out, w)
		}
	}
	return out
}

// RoundTrips returns p50 and p99 round-trip times per operation (get, cas,
// delete) over every call the suite made.
func (r *Report) RoundTrips() []RoundTrip {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []RoundTrip
	for _, op := range []string{"get", "cas", "delete"} {
		ds := slices.Clone(r.rtt[op])
		if len(ds) == 0 {
			continue
		}
		slices.Sort(ds)
		q := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
		out = append(out, RoundTrip{Op: op, N: len(ds), P50: q(0.50), P99: q(0.99)})
	}
	return out
}

// Err returns every violation found, joined, or nil. Promises left
// unverified are not violations: see Blocking.
func (r *Report) Err() error {
	var errs []error
	for _, res := range r.results() {
		errs = append(errs, res.Problems...)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("conformance: the store breaks %d promise(s):\n%w", len(errs), errors.Join(errs...))
}

// ObservedExpiry is the declared expiry model widened by what was measured:
// Early raised to the earliest vanish seen, Late to the latest.
func (r *Report) ObservedExpiry() driver.ExpiryModel {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.Traits.Expiry
	if r.Expiry != nil {
		m.Early = max(m.Early, r.Expiry.Early)
		m.Late = max(m.Late, r.Expiry.Late)
	}
	return m
}

// TTLMarginFor is the TTLMargin a fleet whose clocks differ by up to skew
// needs over this store: what the declared model requires, or more if the
// store was measured expiring earlier than it declares.
func (r *Report) TTLMarginFor(skew time.Duration) time.Duration {
	return max(r.Traits.Expiry.RequiredMargin(skew), r.ObservedExpiry().RequiredMargin(skew))
}

// String formats the report as a short text table.
func (r *Report) String() string {
	var b strings.Builder
	t := r.Traits
	fmt.Fprintf(&b, "declared: atomic=%v expiry=%s granularity=%v minTTL=%v early=%v late=%v staleness=%v minWriteInterval=%v\n",
		t.Atomic, t.Expiry.Kind, t.Expiry.Granularity, t.Expiry.MinTTL, t.Expiry.Early, t.Expiry.Late, t.ReadStaleness, t.MinWriteInterval)
	results := r.results()
	r.mu.Lock()
	exp, stale, staleOK := r.Expiry, r.Staleness, r.StalenessMeasured
	r.mu.Unlock()
	for _, res := range results {
		what := res.PromiseText
		if res.Kind == KindDeclaration {
			what += " [checks the declared traits in simulation, not the store]"
		}
		fmt.Fprintf(&b, "%-12s %-34s %s\n", res.Status(), res.Case, what)
		for _, p := range res.Problems {
			fmt.Fprintf(&b, "       - %s\n", p)
		}
		for _, n := range res.Notes {
			fmt.Fprintf(&b, "       · %s\n", n)
		}
	}
	if exp != nil {
		how := "waited"
		if exp.Advanced {
			how = "advanced backend clock"
		}
		fmt.Fprintf(&b, "expiry: ttl=%v effective=%v vanished after [%v, %v] (%s); early by %v, late by %v\n",
			exp.TTL, exp.Effective, exp.Min.Round(time.Millisecond), exp.Max.Round(time.Millisecond), how, exp.Early.Round(time.Millisecond), exp.Late.Round(time.Millisecond))
	}
	if staleOK {
		fmt.Fprintf(&b, "read staleness seen: %v (declared %v)\n", stale.Round(time.Millisecond), t.ReadStaleness)
	}
	for _, rt := range r.RoundTrips() {
		fmt.Fprintf(&b, "round trip %-6s n=%-5d p50=%v p99=%v\n", rt.Op, rt.N, rt.P50.Round(time.Microsecond), rt.P99.Round(time.Microsecond))
	}
	r.writeGaps(&b, results)
	skew := r.Options.ClockSkew
	fmt.Fprintf(&b, "TTLMargin needed for clock skew %v: %v (declared model alone: %v)\n",
		skew, r.TTLMarginFor(skew), t.Expiry.RequiredMargin(skew))
	return b.String()
}

// writeGaps writes the waived promises and the not-verified ones; each of
// the latter that fails the run says how a harness could waive it and
// what that would accept.
func (r *Report) writeGaps(b *strings.Builder, results []Result) {
	var waived []string
	for _, res := range results {
		for _, g := range res.NotVerified {
			if g.Waived != "" {
				waived = append(waived, fmt.Sprintf("%s (%s) in %s: %s", g.Promise, g.PromiseText, res.Case, g.Detail))
				waived = append(waived, "  waived by the harness: "+g.Waived)
			}
		}
	}
	for _, w := range r.UnusedWaivers() {
		waived = append(waived, fmt.Sprintf("%s: waived (%s), but nothing of it went unverified in this run", w.Promise, w.Reason))
	}
	if len(waived) > 0 {
		fmt.Fprintf(b, "WAIVED (accepted unverified by the harness, conformance.Waive):\n")
		for _, w := range waived {
			fmt.Fprintf(b, "       ~ %s\n", w)
		}
	}
	nv := r.NotVerified()
	if len(nv) == 0 {
		return
	}
	fmt.Fprintf(b, "NOT VERIFIED (%d): a pass says nothing about these\n", len(nv))
	for _, n := range nv {
		fmt.Fprintf(b, "       ! %s\n", n)
	}
	cases, gaps := r.Blocking()
	if len(gaps) == 0 {
		return
	}
	fmt.Fprintf(b, "UNVERIFIED PROMISES A BREAKER RELIES ON (%d): they fail the run until verified or waived\n", len(gaps))
	for i, g := range gaps {
		fmt.Fprintf(b, "       ! %s (%s) in %s\n", g.Promise, g.PromiseText, cases[i])
		fmt.Fprintf(b, "         a harness could waive it with %s, meaning %s\n", g.Waive, g.Meaning)
	}
}
