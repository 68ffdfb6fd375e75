package otelkvbreaker

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"go.opentelemetry.io/otel/trace"
)

// recorder is a program's own Observer: it logs every event as a line.
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, fmt.Sprintf(format, args...))
}

// observer is r's hooks. spanned: its StoreCall must run under a span
// (the one otelkvbreaker's StoreCall, composed before it, started).
func (r *recorder) observer(spanned bool) *kvbreaker.Observer {
	return &kvbreaker.Observer{
		Decision: func(_ context.Context, e kvbreaker.DecisionInfo) {
			r.add("decision %s %v cached=%v", e.Host, e.Decision, e.Cached)
		},
		Outcome: func(_ context.Context, e kvbreaker.OutcomeInfo) {
			r.add("outcome %s %v err=%v", e.Host, e.Outcome, e.Err)
		},
		Transition: func(_ context.Context, e kvbreaker.TransitionInfo) {
			r.add("transition %s %v->%v", e.Host, e.From, e.To)
		},
		Abandon: func(_ context.Context, e kvbreaker.AbandonInfo) {
			r.add("abandon %s released=%v", e.Host, e.Released)
		},
		StoreCall: func(ctx context.Context, e kvbreaker.StoreCallInfo) (context.Context, func(kvbreaker.StoreCallDoneInfo)) {
			if spanned && !trace.SpanContextFromContext(ctx).IsValid() {
				r.add("store %s %s outside otelkvbreaker's span", e.Op, e.Host)
			}
			return ctx, func(d kvbreaker.StoreCallDoneInfo) { r.add("store %s %s %s", e.Op, e.Host, d.Outcome) }
		},
		ClockOffset: func(_ context.Context, o kvbreaker.ClockOffset) {
			r.add("clock offset %v", o.Offset)
		},
		RecordAnomaly: func(_ context.Context, e kvbreaker.AnomalyInfo) {
			r.add("anomaly %s %s", e.Host, e.Anomaly)
		},
	}
}

// TestComposed: otelkvbreaker's Observer and a program's own, composed in
// either order, both see every event of a scripted run: decisions of each
// kind, a drop among them, outcomes of each kind, transitions, store calls
// and an anomaly. The metrics come from the SDK's ManualReader.
func TestComposed(t *testing.T) {
	for _, otelFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("otel-first=%v", otelFirst), func(t *testing.T) {
			ctx := context.Background()
			otelObs, reader, spans := newTestObserver(t)
			var rec recorder
			obs := kvbreaker.ComposeObservers(rec.observer(otelFirst), otelObs)
			if otelFirst {
				obs = kvbreaker.ComposeObservers(otelObs, rec.observer(otelFirst))
			}
			now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			clock := func() time.Time { return now }
			store := memory.New(memory.WithClock(clock))
			if _, err := store.CompareAndSwap(ctx, "junk.example", driver.NoVersion, []byte("not a record"), time.Hour); err != nil {
				t.Fatal(err)
			}
			b := must(kvbreaker.New(store, kvbreaker.Settings{FailureThreshold: 1, RecoveryDelay: time.Minute, HoldLimit: time.Hour,
				Clock: clock, Observer: obs, Logger: slog.New(slog.DiscardHandler)}))
			allow := func(host string, heldSince time.Time, want kvbreaker.Decision) {
				t.Helper()
				if v, _ := b.Allow(ctx, host, heldSince); v.Decision != want {
					t.Fatalf("Allow %s: %v, want %v", host, v.Decision, want)
				}
			}
			ok := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			allow("junk.example", time.Time{}, kvbreaker.Send) // an undecodable record
			allow(host, time.Time{}, kvbreaker.Send)
			ok(b.ReachableFailure(ctx, host)) // no record: a read, nothing to delete
			ok(b.Failure(ctx, host))          // opens
			allow(host, time.Time{}, kvbreaker.Hold)
			allow(host, now.Add(-2*time.Hour), kvbreaker.Drop)
			now = now.Add(2 * time.Minute)
			allow(host, time.Time{}, kvbreaker.Probe)
			ok(b.Success(ctx, host)) // closes

			want := []string{
				"store get junk.example ok", "anomaly junk.example undecodable", "decision junk.example send cached=false",
				"store get inbox.example not_found", "decision inbox.example send cached=false",
				"store get inbox.example not_found", "outcome inbox.example reachable-failure err=<nil>",
				"store compare_and_swap inbox.example ok", "transition inbox.example closed->open", "outcome inbox.example failure err=<nil>",
				"store get inbox.example ok", "decision inbox.example hold cached=false",
				"decision inbox.example drop cached=false",
				"store get inbox.example ok", "store compare_and_swap inbox.example ok", "transition inbox.example open->half-open", "decision inbox.example probe cached=false",
				"store compare_and_delete inbox.example ok", "transition inbox.example half-open->closed", "outcome inbox.example success err=<nil>",
			}
			if !slices.Equal(rec.got, want) {
				t.Errorf("the recording observer saw\n\t%s\nwant\n\t%s", strings.Join(rec.got, "\n\t"), strings.Join(want, "\n\t"))
			}
			call := func(op, outcome string, n int) string {
				return fmt.Sprintf("kvbreaker.store.call.duration{kvbreaker.store.operation=%s,kvbreaker.store.outcome=%s} count=%d sum=%.4f le0.001:%d", op, outcome, n, float64(n)/1000, n)
			}
			diff(t, "otelkvbreaker's metrics", points(t, reader), []string{
				"kvbreaker.decisions{kvbreaker.cached=false,kvbreaker.decision=send} 2",
				"kvbreaker.decisions{kvbreaker.cached=false,kvbreaker.decision=hold} 1",
				"kvbreaker.decisions{kvbreaker.cached=false,kvbreaker.decision=drop} 1",
				"kvbreaker.decisions{kvbreaker.cached=false,kvbreaker.decision=probe} 1",
				"kvbreaker.drops{} 1",
				"kvbreaker.outcomes{kvbreaker.outcome=success} 1",
				"kvbreaker.outcomes{kvbreaker.outcome=reachable-failure} 1",
				"kvbreaker.outcomes{kvbreaker.outcome=failure} 1",
				"kvbreaker.transitions{kvbreaker.transition.from=closed,kvbreaker.transition.to=open} 1",
				"kvbreaker.transitions{kvbreaker.transition.from=open,kvbreaker.transition.to=half-open} 1",
				"kvbreaker.transitions{kvbreaker.transition.from=half-open,kvbreaker.transition.to=closed} 1",
				"kvbreaker.record.anomalies{kvbreaker.record.anomaly=undecodable} 1",
				call("get", "ok", 3),
				call("get", "not_found", 2),
				call("compare_and_delete", "ok", 1),
				call("compare_and_swap", "ok", 2),
			})
			if n := len(spans.Ended()); n != 8 {
				t.Errorf("%d store-call spans, want 8", n)
			}
		})
	}
}
