package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/model"
)

// TestStoreCostBelowFedify: on the default scenario (`kvbreaker simulate`),
// kvbreaker sends fewer store requests per 1,000 deliveries than the fedify
// model, with its cache off and, fewer still, on; the ratios are logged.
// The cache's decision differences are counted, each on a record younger
// than CacheStaleness. It runs the default scenario also under -race
// (about 15 s), since the 0.05× goal below is the default scenario's; under
// -short, a smaller fleet, whose fewer deliveries per change cost the lazy
// feed more (0.060× measured), held to 0.07×. The negative control
// raises CacheStaleness to 10 minutes: stale decisions then occur, on
// records older than a second, so the counters can count.
//
// kvbreaker+mirror, with the default 5 ms propagation delay, sends at most
// 0.05× the fedify model's requests, both where the feed carries the
// values (etcd, memory) and where it names changed keys, read when next
// asked about (Redis, PostgreSQL), and every decision in which it differs from fedify's (and
// kvbreaker's, which are all fedify's here) is one it counted as stale: made
// on a mirror that had not yet received a change less than 5 ms old. Its
// control (10 min delay) shows those counters counting lags past 5 ms.
func TestStoreCostBelowFedify(t *testing.T) {
	s, lazyBound := Scenario{Seed: 1}, 0.05
	if testing.Short() {
		s, lazyBound = Scenario{Seed: 1, Hosts: 200, Workers: 16, Duration: 3 * time.Hour}, 0.07
	}
	r := run(t, s)
	fed, kv, kvc, gob := byName(t, r, "fedify-model"), byName(t, r, "kvbreaker"), byName(t, r, "kvbreaker+cache"), byName(t, r, "gobreaker-distributed")
	mir := byName(t, r, "kvbreaker+mirror")
	for _, m := range []ModelReport{fed, kv, kvc, gob, mir} {
		if m.StoreReads == 0 || m.StoreWrites == 0 || m.RequestsPer1000Deliveries <= 0 {
			t.Fatalf("%s counted no requests: %+v", m.Model, m)
		}
	}
	if !(kv.RequestsPer1000Deliveries < fed.RequestsPer1000Deliveries) || !(kvc.RequestsPer1000Deliveries < kv.RequestsPer1000Deliveries) {
		t.Errorf("requests per 1,000 deliveries: fedify %.1f, kvbreaker %.1f, kvbreaker+cache %.1f: want each below the one before",
			fed.RequestsPer1000Deliveries, kv.RequestsPer1000Deliveries, kvc.RequestsPer1000Deliveries)
	}
	c := kvc.Cache
	if c == nil || c.Served == 0 || c.MaxStaleAgeMS >= 1000 {
		t.Errorf("cache report %+v: want Allows served, and every stale decision on a record younger than 1 s", c)
	}
	t.Logf("requests per 1,000 deliveries: fedify %.1f, kvbreaker %.1f (ratio %.3f), kvbreaker+cache %.1f (ratio %.3f), gobreaker-distributed %.1f (ratio %.3f); cache: %d Allows served, %d stale decisions (oldest %.0f ms)",
		fed.RequestsPer1000Deliveries, kv.RequestsPer1000Deliveries, kv.RequestsPer1000Deliveries/fed.RequestsPer1000Deliveries,
		kvc.RequestsPer1000Deliveries, kvc.RequestsPer1000Deliveries/fed.RequestsPer1000Deliveries,
		gob.RequestsPer1000Deliveries, gob.RequestsPer1000Deliveries/fed.RequestsPer1000Deliveries, c.Served, c.StaleDecisions, c.MaxStaleAgeMS)

	m := mir.Mirror
	if ratio := m.RequestsPer1000DeliveriesNoFeedReads / fed.RequestsPer1000Deliveries; ratio > 0.05 {
		t.Errorf("kvbreaker+mirror: %.1f requests per 1,000 deliveries with a feed of values, %.3f× fedify's: want at most 0.05×", m.RequestsPer1000DeliveriesNoFeedReads, ratio)
	}
	if ratio := mir.RequestsPer1000Deliveries / fed.RequestsPer1000Deliveries; ratio > lazyBound || m.FeedReads == 0 {
		t.Errorf("kvbreaker+mirror: %.1f requests per 1,000 deliveries with a feed of invalidations (%d reads after a Stale), %.3f× fedify's: want at most %.2f×, and some reads", mir.RequestsPer1000Deliveries, m.FeedReads, ratio, lazyBound)
	}
	checkMirrorStale(t, kv, mir, 5)
	t.Logf("kvbreaker+mirror (delay %s): %.1f requests per 1,000 deliveries with a feed of values (ratio %.4f), %.1f with a feed of invalidations, a changed key read when next asked about (ratio %.4f); "+
		"%d stale decisions, %d stale retry instants, %d stale outcomes (longest lag %.0f ms) in %d Allows",
		m.Delay, m.RequestsPer1000DeliveriesNoFeedReads, m.RequestsPer1000DeliveriesNoFeedReads/fed.RequestsPer1000Deliveries,
		mir.RequestsPer1000Deliveries, mir.RequestsPer1000Deliveries/fed.RequestsPer1000Deliveries,
		m.StaleDecisions, m.StaleRetries, m.StaleOutcomes, m.MaxLagMS, m.Served)

	t.Run("control-long-mirror-delay", func(t *testing.T) {
		s := Scenario{Seed: 2, Hosts: 20, Workers: 16, Mix: Mix{Healthy: 1, Dead: 2, Flapping: 3, Slow: 2}, Rate: 120, Duration: time.Hour,
			MirrorDelay: 10 * time.Minute}
		r := run(t, s)
		m := byName(t, r, "kvbreaker+mirror").Mirror
		if m.StaleDecisions == 0 || m.StaleOutcomes == 0 || m.MaxLagMS <= 5 || m.MaxLagMS >= 600_000 {
			t.Errorf("10 min delay: %+v, want stale decisions and outcomes, lags past 5 ms and under 10 min", m)
		}
		checkMirrorStale(t, byName(t, r, "kvbreaker"), byName(t, r, "kvbreaker+mirror"), 600_000)
	})

	t.Run("control-long-staleness", func(t *testing.T) {
		s := Scenario{Seed: 2, Hosts: 40, Workers: 16, Mix: Mix{Healthy: 1, Dead: 2, Flapping: 3, Slow: 2}, Rate: 120, Duration: 2 * time.Hour,
			CacheStaleness: 10 * time.Minute}
		c := byName(t, run(t, s), "kvbreaker+cache").Cache
		if c.StaleDecisions == 0 || c.MaxStaleAgeMS <= 1000 {
			t.Errorf("10 min staleness: %+v, want stale decisions on records older than 1 s", c)
		}
	})
}

// TestZipfPopularity: with Zipf popularity the hottest host sees far more
// calls than the median one, and the total stays near uniform's (the mean
// rate per host is kept); uniform is the control, its hottest host within
// a small factor of its median.
func TestZipfPopularity(t *testing.T) {
	spread := func(zipf float64) (top, median, total int) {
		per := map[string]int{}
		s := Scenario{Seed: 5, Hosts: 100, Workers: 16, Duration: 2 * time.Hour, Mix: Mix{Healthy: 1}, Zipf: zipf, Quiet: time.Minute, noMirror: true,
			AfterEvent: func(host string, _ time.Time, _ []model.Model) { per[host]++ }}
		run(t, s)
		var n []int
		for _, c := range per {
			n = append(n, c)
			total += c
		}
		slices.Sort(n)
		return n[len(n)-1], n[len(n)/2], total
	}
	ut, um, un := spread(0)
	zt, zm, zn := spread(1)
	t.Logf("calls per host: uniform top %d, median %d, total %d; zipf:1 top %d, median %d, total %d", ut, um, un, zt, zm, zn)
	if ut > 3*um {
		t.Errorf("uniform: top host %d calls, median %d: want within 3x", ut, um)
	}
	if zt < 10*zm {
		t.Errorf("zipf: top host %d calls, median %d: want at least 10x", zt, zm)
	}
	if d := float64(zn-un) / float64(un); d < -0.2 || d > 0.2 {
		t.Errorf("zipf total %d vs uniform %d: want within 20%%", zn, un)
	}
}

// checkMirrorStale: kvbreaker agrees with fedify on everything, and every
// decision and retry instant in which the mirror's column differs from
// fedify's is one it counted as stale, with a lag below delayMS.
func checkMirrorStale(t *testing.T, kv, mir ModelReport, delayMS float64) {
	t.Helper()
	if kv.Agreement != 1 || kv.RetryMismatches != 0 || kv.TransitionMismatches != 0 {
		t.Fatalf("kvbreaker differs from fedify: %+v", kv)
	}
	m := mir.Mirror
	if d := mir.UnsafeDivergences + mir.SafeDivergences + mir.LateProbes + mir.SendProbeSwaps + mir.AfterRecordLoss; d != m.StaleDecisions || mir.RetryMismatches != m.StaleRetries {
		t.Errorf("kvbreaker+mirror: %d decisions and %d retry instants differ from fedify's, %d and %d counted stale (%+v)", d, mir.RetryMismatches, m.StaleDecisions, m.StaleRetries, mir)
	}
	if m.MaxLagMS >= delayMS || mir.TransitionMismatches != 0 {
		t.Errorf("kvbreaker+mirror: longest lag %.0f ms (delay %.0f ms), %d state-change labels differ", m.MaxLagMS, delayMS, mir.TransitionMismatches)
	}
}
