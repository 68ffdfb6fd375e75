package kvbreaker_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
)

// The tests in this file kill mutants of anomaly.go (go run ./tools/mutants
// -pkg . -files anomaly.go) that the other tests let live.

// plantUndecodable stores a value no Breaker can decode under each host.
func plantUndecodable(t *testing.T, store driver.Store, hosts ...string) {
	t.Helper()
	for _, h := range hosts {
		if _, err := store.CompareAndSwap(t.Context(), h, driver.NoVersion, []byte("not a record"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
}

// warnLines returns the warning lines logs holds about host.
func warnLines(logs *bytes.Buffer, host string) []string {
	var out []string
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "host="+host+" ") {
			out = append(out, l)
		}
	}
	return out
}

// TestAnomalyWarningRepeatsAfterInterval: an anomaly of one host is logged
// once per anomalyWarnEvery (10 minutes) and again as soon as that much
// time has passed, saying how many warnings it held back meanwhile; the
// Observer sees every one. The warning says which anomaly it is.
func TestAnomalyWarningRepeatsAfterInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		store := memory.New()
		plantUndecodable(t, store, host)
		var logs bytes.Buffer
		observed := 0
		b := newBreaker(t, store, kvbreaker.Settings{
			Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			Observer: &kvbreaker.Observer{RecordAnomaly: func(context.Context, kvbreaker.AnomalyInfo) {
				observed++
			}},
		})
		allow := func() {
			t.Helper()
			if v, err := b.Allow(ctx, host, time.Time{}); err != nil || v.Decision != kvbreaker.Send {
				t.Fatalf("Allow over an undecodable record = %+v, %v; want Send", v, err)
			}
		}
		allow()
		w := warnLines(&logs, host)
		if len(w) != 1 || !strings.Contains(w[0], "undecodable") || !strings.Contains(w[0], "suppressed_since_last=0") {
			t.Fatalf("first anomaly logged %q; want one undecodable-record warning with suppressed_since_last=0", w)
		}
		allow()
		time.Sleep(10*time.Minute - time.Nanosecond)
		allow()
		if w := warnLines(&logs, host); len(w) != 1 {
			t.Fatalf("within 10 minutes the anomaly was logged %d times; want once:\n%s", len(w), logs.String())
		}
		time.Sleep(time.Nanosecond) // exactly 10 minutes after the warning
		allow()
		w = warnLines(&logs, host)
		if len(w) != 2 || !strings.Contains(w[1], "suppressed_since_last=2") {
			t.Fatalf("10 minutes after the warning: logged %q; want a second warning with suppressed_since_last=2", w)
		}
		allow()
		if w := warnLines(&logs, host); len(w) != 2 {
			t.Fatalf("right after the second warning the anomaly was logged %d times; want 2", len(w))
		}
		if observed != 5 {
			t.Fatalf("the Observer saw %d anomalies of 5 calls; want every one", observed)
		}
	})
}

// TestAnomalyFutureWarning: a record stamped by a fast clock is logged as
// such, not as an undecodable one.
func TestAnomalyFutureWarning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		store := memory.New()
		fast := newBreaker(t, store, kvbreaker.Settings{Clock: func() time.Time { return time.Now().Add(time.Hour) }, SkipClockCheck: true})
		if err := fast.Failure(ctx, host); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		var seen []string
		b := newBreaker(t, store, kvbreaker.Settings{
			Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			Observer: &kvbreaker.Observer{RecordAnomaly: func(_ context.Context, e kvbreaker.AnomalyInfo) {
				seen = append(seen, e.Anomaly)
			}},
		})
		if _, err := b.Allow(ctx, host, time.Time{}); err != nil {
			t.Fatal(err)
		}
		w := warnLines(&logs, host)
		if len(w) != 1 || !strings.Contains(w[0], "clock ahead") || strings.Contains(w[0], "undecodable") {
			t.Fatalf("a record from a fast clock logged %q; want one warning of a clock ahead", w)
		}
		if len(seen) != 1 || seen[0] != "future" {
			t.Fatalf("Observer saw %q; want [%q]", seen, "future")
		}
	})
}

// TestAnomalyObserverWithoutRecordAnomaly: an Observer that does not set
// RecordAnomaly is not called for one (a nil func).
func TestAnomalyObserverWithoutRecordAnomaly(t *testing.T) {
	store := memory.New()
	plantUndecodable(t, store, host)
	b := newBreaker(t, store, kvbreaker.Settings{
		Logger:   slog.New(slog.DiscardHandler),
		Observer: &kvbreaker.Observer{Decision: func(context.Context, kvbreaker.DecisionInfo) {}},
	})
	if v, err := b.Allow(t.Context(), host, time.Time{}); err != nil || v.Decision != kvbreaker.Send {
		t.Fatalf("Allow = %+v, %v; want Send", v, err)
	}
}

// TestAnomalyHostsBounded: the hosts remembered for rate limiting are
// bounded by anomalyHosts (1024): the 1025th host starts afresh, so the
// first host's anomaly is logged again early, and the memory of a flood of
// hostile records stays bounded.
func TestAnomalyHostsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		store := memory.New()
		hosts := make([]string, 1025)
		for i := range hosts {
			hosts[i] = fmt.Sprintf("h%d.example", i)
		}
		plantUndecodable(t, store, hosts...)
		var logs bytes.Buffer
		b := newBreaker(t, store, kvbreaker.Settings{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		allow := func(h string) {
			t.Helper()
			if _, err := b.Allow(ctx, h, time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
		for _, h := range hosts[:1024] {
			allow(h)
		}
		allow(hosts[0])
		if n := len(warnLines(&logs, hosts[0])); n != 1 {
			t.Fatalf("with 1024 hosts remembered, %s was logged %d times; want once", hosts[0], n)
		}
		allow(hosts[1024]) // the 1025th host: the memory starts afresh
		allow(hosts[0])
		if n := len(warnLines(&logs, hosts[0])); n != 2 {
			t.Fatalf("after a 1025th host, %s was logged %d times; want twice (the memory is bounded)", hosts[0], n)
		}
	})
}
