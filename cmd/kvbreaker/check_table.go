package main

import (
	"fmt"
	"io"
	"time"
)

// resultWords are the table's words for a promise row's result.
var resultWords = map[string]string{
	resultOK: "ok", resultBroken: "BROKEN", resultNotRun: "not run", resultNotPromised: "not promised",
}

// skipWords are the table's words for a skipped case, by reason.
var skipWords = map[string]string{
	skipQuick:       "waits in real time (--quick)",
	skipNotPromised: "not promised",
	skipUnreachable: "not run: the store is unreachable",
}

func (o *checkOutput) writeTable(w io.Writer) {
	d := o.Declared
	fmt.Fprintf(w, "kvbreaker check: %s (prefix %s, %.1fs)\n", o.Target, o.Prefix, o.WallMS/1000)
	cas := "atomic compare-and-swap"
	if !d.Atomic {
		cas = "last writer wins"
	}
	fmt.Fprintf(w, "declared: %s; %s expiry, granularity %v, min TTL %v, early %v, late %v; read staleness %v; min write interval %v\n\n",
		cas, d.ExpiryKind, fromMS(d.GranularityMS), fromMS(d.MinTTLMS), fromMS(d.EarlyMS), fromMS(d.LateMS), fromMS(d.ReadStalenessMS), fromMS(d.MinWriteIntervalMS))
	fmt.Fprintf(w, "%-28s %-22s %-38s %s\n", "PROMISE", "DECLARED", "MEASURED", "RESULT")
	for _, p := range o.Promises {
		fmt.Fprintf(w, "%-28s %-22s %-38s %s\n", p.label, p.declared, p.measured, resultWords[p.Result])
	}
	fmt.Fprintln(w)
	if e := o.Expiry; e != nil {
		how := "waited in real time"
		if e.ClockAdvanced {
			how = "backend clock advanced"
		}
		fmt.Fprintf(w, "expiry: written with TTL %v (effective %v), vanished between %v and %v after the write (%s)\n",
			fromMS(e.TTLMS), fromMS(e.EffectiveTTLMS), fromMS(e.VanishedMinMS).Round(time.Millisecond), fromMS(e.VanishedMaxMS).Round(time.Millisecond), how)
	}
	for _, rt := range o.RoundTrips {
		fmt.Fprintf(w, "round trip %-7s p50 %-10v p99 %-10v (%d calls)\n", rt.Op, fromMS(rt.P50MS).Round(time.Microsecond), fromMS(rt.P99MS).Round(time.Microsecond), rt.N)
	}
	fmt.Fprintf(w, "TTLMargin needed for clock skew %v: %v (declared model alone: %v)\n\n",
		fromMS(o.Margin.ClockSkewMS), fromMS(o.Margin.NeededMS), fromMS(o.Margin.DeclaredModelMS))
	if o.Clock != nil {
		fmt.Fprintf(w, "%s\n\n", o.Clock.line())
	}
	pass, skip, fail := 0, 0, 0
	for _, c := range o.Cases {
		switch c.Status {
		case "pass":
			pass++
		case "skip":
			skip++
		default:
			fail++
		}
	}
	fmt.Fprintf(w, "cases: %d passed, %d skipped, %d failed or inconclusive\n", pass, skip, fail)
	for _, c := range o.Cases {
		switch c.Status {
		case "fail":
			fmt.Fprintf(w, "FAIL %s\n", c.Case)
			for _, p := range c.Problems {
				fmt.Fprintf(w, "     - %s: %s\n", p.Promise.Text(), p.Detail)
			}
		case "skip":
			why, ok := skipWords[*c.SkipReason]
			if !ok {
				why = *c.Message
			} else if *c.SkipReason == skipNotPromised {
				why += ": " + *c.Message // which promise the store does not make, and why
			}
			fmt.Fprintf(w, "skip %s: %s\n", c.Case, why)
		case "inconclusive":
			fmt.Fprintf(w, "INCONCLUSIVE %s: %s\n", c.Case, *c.Message)
		}
	}
	if len(o.NotVerified) > 0 {
		fmt.Fprintf(w, "NOT VERIFIED (a pass says nothing about these):\n")
		waivable := 0
		for _, nv := range o.NotVerified {
			fmt.Fprintf(w, "     - %s: %s\n", nv.Case, nv.Message)
			if nv.Waiver != nil {
				waivable++
				fmt.Fprintf(w, "       a Breaker relies on %s: a conformance harness that cannot verify it fails unless it waives it with\n         %s,\n         meaning %s\n",
					string(nv.Promise), *nv.Waiver, *nv.WaiverMeaning)
			}
		}
		if waivable > 0 {
			fmt.Fprintf(w, "check does not fail for these: it cannot advance a live store's clock, read its lifetimes or lose its answers; the adapter's conformance test verifies them\n")
		}
	}
	if o.Cleanup.Left > 0 {
		fmt.Fprintf(w, "cleanup: %d keys deleted, %d left to expire\n", o.Cleanup.Deleted, o.Cleanup.Left)
	}
	switch {
	case o.TimedOut:
		fmt.Fprintln(w, "result: TIMED OUT (partial report)")
	case len(o.Broken) > 0:
		fmt.Fprintf(w, "result: the store breaks %d promise(s) it declares\n", len(o.Broken))
	case o.Clock != nil && o.Clock.Result == clockExceeds:
		fmt.Fprintln(w, "result: the store keeps its promises, but this machine's clock is further from the store's than --clock-skew (above)")
	case !o.OK:
		fmt.Fprintln(w, "result: INCONCLUSIVE (above): run check again")
	case len(o.NotVerified) > 0:
		fmt.Fprintf(w, "result: the store keeps every promise verified; %d not verified (above)\n", len(o.NotVerified))
	default:
		fmt.Fprintln(w, "result: the store keeps every promise it declares")
	}
}
