package conformance

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// Result is one case's outcome.
type Result struct {
	// Case is the case's stable ID (the subtest name under Run).
	Case CaseID
	// Promise is the contract clause the case checks; each of Problems
	// names the one it breaks, which may be another the case relies on.
	Promise PromiseID
	// Kind says whether the case calls the store (KindStore) or checks the
	// declared Traits in simulation without touching it (KindDeclaration).
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
	// Problems are the violations found, each a *Problem wrapping the
	// PromiseID it breaks (errors.Is(p, PromiseNotEarly)).
	Problems []error
	// Notes are measurements and observations worth reporting.
	Notes []string
	// NotVerified lists what the case could not check, each with why (no
	// harness capability to reach the TTL, skipped under -short): a pass
	// says nothing about these.
	NotVerified []string
	// Inconclusive says why the case's check could not decide (a
	// linearizability search that timed out, even when retried). An
	// inconclusive case has not passed.
	Inconclusive string

	order int // the case's place in the table
}

// Passed reports whether the case ran, decided, and found nothing wrong.
func (r *Result) Passed() bool {
	return r.Skipped == "" && len(r.Problems) == 0 && r.Inconclusive == ""
}

// Broke reports whether one of the case's problems breaks promise.
func (r *Result) Broke(promise PromiseID) bool {
	for _, p := range r.Problems {
		if errors.Is(p, promise) {
			return true
		}
	}
	return false
}

// ExpiryMeasurement is what the expiry case observed for one entry.
type ExpiryMeasurement struct {
	// TTL is the TTL written; Effective is max(TTL, MinTTL).
	TTL, Effective time.Duration
	// VanishedAfter is when, after the write, the entry was first seen
	// absent: between Min (last seen present) and Max (first seen absent),
	// as the write's and the reads' round trips allow.
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

// Report is what Measure found: per-case results and measurements.
type Report struct {
	// Traits are what the store declared.
	Traits driver.Traits
	// Options are the options the suite ran with, defaults applied.
	Options Options

	mu      sync.Mutex
	Results []Result
	// Expiry is set when the expiry case ran.
	Expiry *ExpiryMeasurement
	// Staleness is the longest a completed write stayed invisible to Get;
	// StalenessMeasured says the staleness case ran.
	Staleness         time.Duration
	StalenessMeasured bool
	rtt               map[string][]time.Duration
}

func newReport(t driver.Traits, o Options) *Report {
	return &Report{Traits: t, Options: o, rtt: make(map[string][]time.Duration)}
}

// add records res in table order (background cases finish out of order).
func (r *Report) add(res Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, _ := slices.BinarySearchFunc(r.Results, res.order, func(a Result, o int) int { return a.order - o })
	r.Results = slices.Insert(r.Results, i, res)
}

// NotVerified lists every promise the run did not verify: cases skipped
// (with why), checks a case could not make, and inconclusive cases. Empty
// means everything the suite knows to check was checked.
func (r *Report) NotVerified() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, res := range r.Results {
		if res.Skipped != "" && !res.NotPromised {
			out = append(out, fmt.Sprintf("%s (%s): %s", res.Case, res.Promise.Text(), res.Skipped))
		}
		for _, n := range res.NotVerified {
			out = append(out, string(res.Case)+": "+n)
		}
		if res.Inconclusive != "" {
			out = append(out, fmt.Sprintf("%s (%s): inconclusive: %s", res.Case, res.Promise.Text(), res.Inconclusive))
		}
	}
	return out
}

func (r *Report) roundTrip(op string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rtt[op] = append(r.rtt[op], d)
}

func (r *Report) setExpiry(m ExpiryMeasurement) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Expiry = &m
}

func (r *Report) setStaleness(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.StalenessMeasured = true
	r.Staleness = max(r.Staleness, d)
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

// Err returns every violation found, joined, or nil.
func (r *Report) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, res := range r.Results {
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
	r.mu.Lock()
	results := slices.Clone(r.Results)
	exp, stale, staleOK := r.Expiry, r.Staleness, r.StalenessMeasured
	r.mu.Unlock()
	for _, res := range results {
		status := "PASS"
		switch {
		case res.Skipped != "":
			status = "SKIP"
		case len(res.Problems) > 0:
			status = "FAIL"
		case res.Inconclusive != "":
			status = "INCONCLUSIVE"
		}
		what := res.Promise.Text()
		if res.Kind == KindDeclaration {
			what += " [checks the declared traits in simulation, not the store]"
		}
		fmt.Fprintf(&b, "%-4s %-34s %s\n", status, res.Case, what)
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
	if nv := r.NotVerified(); len(nv) > 0 {
		fmt.Fprintf(&b, "NOT VERIFIED (%d): a pass says nothing about these\n", len(nv))
		for _, n := range nv {
			fmt.Fprintf(&b, "       ! %s\n", n)
		}
	}
	skew := r.Options.ClockSkew
	fmt.Fprintf(&b, "TTLMargin needed for clock skew %v: %v (declared model alone: %v)\n",
		skew, r.TTLMarginFor(skew), t.Expiry.RequiredMargin(skew))
	return b.String()
}
