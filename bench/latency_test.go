package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/kvbreaker/kvbreaker"
)

// latencyRig is a rig for latency measurements: the Workers KV adapter's
// own read cache is off, so every Get is a request (with it on, Allow and
// Get are both answered from memory and the ratio would compare Breaker's
// CPU work with a map lookup).
func latencyRig(tb testing.TB, name string) *rig {
	r := newRig(tb, name)
	r.cfCache = []int{0, 0}
	return r
}

// closedHost is the host the latency measurements ask about: no record, the
// common case of a healthy host.
const closedHost = "closed.example"

// BenchmarkRealGet is one raw store read (of an absent key) per backend, to
// divide BenchmarkRealAllow by; run them together:
//
//	go test ./bench -run '^$' -bench 'Real' -benchmem
func BenchmarkRealGet(b *testing.B) {
	for _, name := range realBackends {
		b.Run(name, func(b *testing.B) {
			e := latencyRig(b, name).open()
			ctx := b.Context()
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := e.Get(ctx, closedHost); err != nil && !errorsIsNotFound(err) {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRealAllow is Breaker.Allow on a closed host per backend: one
// store read plus Breaker's own work.
func BenchmarkRealAllow(b *testing.B) {
	for _, name := range realBackends {
		b.Run(name, func(b *testing.B) {
			br, _ := latencyRig(b, name).breaker(kvbreaker.Settings{})
			ctx := b.Context()
			b.ReportAllocs()
			for b.Loop() {
				if v, err := br.Allow(ctx, closedHost, time.Time{}); err != nil || v.Decision != kvbreaker.Send {
					b.Fatal(v.Decision, err)
				}
			}
		})
	}
}

// BenchmarkRealAllowOverGet alternates a raw Get and an Allow on a closed
// host, timing each, and reports the ratio of their medians as the metric
// allow/get (target ≤ 1.15): unlike BenchmarkRealAllow and BenchmarkRealGet,
// which run seconds apart, both see the same load. ns/op is one Get plus one
// Allow.
func BenchmarkRealAllowOverGet(b *testing.B) {
	for _, name := range realBackends {
		b.Run(name, func(b *testing.B) {
			r := latencyRig(b, name)
			e := r.open()
			br, _ := r.breaker(kvbreaker.Settings{})
			ctx := b.Context()
			var gets, allows []time.Duration
			for b.Loop() {
				start := time.Now()
				if _, _, err := e.Get(ctx, closedHost); err != nil && !errorsIsNotFound(err) {
					b.Fatal(err)
				}
				mid := time.Now()
				if v, err := br.Allow(ctx, closedHost, time.Time{}); err != nil || v.Decision != kvbreaker.Send {
					b.Fatal(v.Decision, err)
				}
				gets, allows = append(gets, mid.Sub(start)), append(allows, time.Since(mid))
			}
			b.ReportMetric(float64(median(allows))/float64(median(gets)), "allow/get")
		})
	}
}

// maxAllowOverGet is the ratio above which TestAllowLatencyRatio looks
// for a second round trip: well above the 1.15 target, which a shared CI
// machine under -race cannot promise, but below the ≈2 a second round trip
// per Allow would cost. Whether there was one is then counted on the wire,
// not inferred from time: sub-100 µs stores (Redis, PostgreSQL on
// loopback) swing past 1.5 under a loaded -race run (PostgreSQL 2.9 once in
// CI, 0.72–1.02 on an idle machine) with exactly one request per Allow.
const maxAllowOverGet = 1.5

// TestAllowLatencyRatio times Allow on a closed host against a raw Get of
// the same store, interleaved in blocks so both see the same load, and
// prints median latencies and their ratio (target ≤ 1.15). Above
// maxAllowOverGet it counts the requests of a block of Allows and fails
// unless each sent exactly one read.
func TestAllowLatencyRatio(t *testing.T) {
	rounds, block := 10, 50
	if testing.Short() {
		rounds = 4
	}
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "backend\tGet median\tAllow median\tAllow/Get\ttarget ≤ 1.15")
	for _, name := range realBackends {
		t.Run(name, func(t *testing.T) {
			r := latencyRig(t, name)
			e := r.open()
			br, be := r.breaker(kvbreaker.Settings{})
			ctx := t.Context()
			var gets, allows []time.Duration
			for range rounds {
				for range block {
					// Under the deadline a Breaker puts on each store
					// call (CallTimeout), so both sides pay for it: pgx,
					// for one, sets a socket deadline for a context that
					// has one (about 10 µs here).
					start := time.Now()
					cctx, cancel := context.WithTimeout(ctx, kvbreaker.Settings{}.WithDefaults().CallTimeout)
					_, _, err := e.Get(cctx, closedHost)
					cancel()
					if err != nil && !errorsIsNotFound(err) {
						t.Fatal(err)
					}
					gets = append(gets, time.Since(start))
				}
				for range block {
					start := time.Now()
					if v, err := br.Allow(ctx, closedHost, time.Time{}); err != nil || v.Decision != kvbreaker.Send {
						t.Fatal(v.Decision, err)
					}
					allows = append(allows, time.Since(start))
				}
			}
			g, a := median(gets), median(allows)
			ratio := float64(a) / float64(g)
			met := "yes"
			if ratio > 1.15 {
				met = "no"
			}
			fmt.Fprintf(tw, "%s\t%v\t%v\t%.3f\t%s\n", name, g.Round(time.Microsecond), a.Round(time.Microsecond), ratio, met)
			if ratio > maxAllowOverGet {
				// Slower than one round trip should make it: count (on
				// the wire, or, for a store with no network, the store
				// calls).
				load := be.wire.load
				if be.wire == nil {
					load = be.calls.load
				}
				before := load()
				for range block {
					if _, err := br.Allow(ctx, closedHost, time.Time{}); err != nil {
						t.Fatal(err)
					}
				}
				if d := load().sub(before); d.Reads != int64(block) || d.Writes != 0 || d.Other != 0 {
					t.Errorf("Allow median %v is %.2f× the raw Get median %v, and %d Allows sent %+v: want one read each", a, ratio, g, block, d)
				} else {
					t.Logf("Allow median %v is %.2f× the raw Get median %v, but each Allow sent exactly one read: load, not a second round trip", a, ratio, g)
				}
			}
		})
	}
	tw.Flush()
	t.Log("closed-host Allow latency over the raw store read, medians of interleaved samples:\n" + sb.String())
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
