package kvbreaker_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
)

// nameKey marks a context with the name of the observer whose StoreCall
// returned it.
type nameKey string

// named is an observer that logs every event to log as "<name> <event>",
// and checks that its StoreCall runs on the contexts the observers named
// after returned.
func named(log *events, name string, after ...string) *kvbreaker.Observer {
	return &kvbreaker.Observer{
		Decision: func(_ context.Context, d kvbreaker.DecisionInfo) {
			log.add("%s decision %s %v", name, d.Host, d.Decision)
		},
		Outcome: func(_ context.Context, o kvbreaker.OutcomeInfo) {
			log.add("%s outcome %s %v", name, o.Host, o.Outcome)
		},
		Transition: func(_ context.Context, tr kvbreaker.TransitionInfo) {
			log.add("%s transition %s %v->%v", name, tr.Host, tr.From, tr.To)
		},
		Abandon: func(_ context.Context, a kvbreaker.AbandonInfo) {
			log.add("%s abandon %s released=%v", name, a.Host, a.Released)
		},
		StoreCall: func(ctx context.Context, c kvbreaker.StoreCallInfo) (context.Context, func(kvbreaker.StoreCallDoneInfo)) {
			for _, n := range after {
				if ctx.Value(nameKey(n)) == nil {
					log.add("%s start %s %s without %s's context", name, c.Op, c.Host, n)
				}
			}
			log.add("%s start %s %s", name, c.Op, c.Host)
			return context.WithValue(ctx, nameKey(name), true), func(d kvbreaker.StoreCallDoneInfo) {
				log.add("%s done %s %s %s", name, c.Op, c.Host, d.Outcome)
			}
		},
		ClockOffset: func(context.Context, kvbreaker.ClockOffset) {
			log.add("%s clock-offset", name)
		},
		RecordAnomaly: func(_ context.Context, a kvbreaker.AnomalyInfo) {
			log.add("%s anomaly %s %s", name, a.Host, a.Anomaly)
		},
	}
}

// ctxChecker logs each store call made on a context that lacks one of the
// named observers' marks.
type ctxChecker struct {
	driver.Store
	log   *events
	names []string
}

func (c *ctxChecker) check(ctx context.Context, op string) {
	for _, n := range c.names {
		if ctx.Value(nameKey(n)) == nil {
			c.log.add("store %s without %s's context", op, n)
		}
	}
}

func (c *ctxChecker) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	c.check(ctx, "get")
	return c.Store.Get(ctx, key)
}

func (c *ctxChecker) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	c.check(ctx, "compare_and_swap")
	return c.Store.CompareAndSwap(ctx, key, old, value, ttl)
}

func (c *ctxChecker) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	c.check(ctx, "compare_and_delete")
	return c.Store.CompareAndDelete(ctx, key, old)
}

// both is what two composed observers, a then b, log for the events a
// logged: each event a's then b's, except that the ends of store calls
// come in reverse (b's span, started inside a's, ends first).
func both(a []string) []string {
	var out []string
	for _, l := range a {
		e := strings.TrimPrefix(l, "a ")
		if strings.HasPrefix(e, "done ") {
			out = append(out, "b "+e, "a "+e)
		} else {
			out = append(out, "a "+e, "b "+e)
		}
	}
	return out
}

// TestComposeObservers: two composed observers both see every event of a
// scripted run, each in the order given; the second's StoreCall runs on
// the context the first returned, and the store call on both.
func TestComposeObservers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		var log events
		store := skewedStore(2*time.Second, 0, 0, 0)
		plantUndecodable(t, store, "junk.example")
		store.Store = &ctxChecker{Store: store.Store, log: &log, names: []string{"a", "b"}}
		obs := kvbreaker.ComposeObservers(nil, named(&log, "a"), &kvbreaker.Observer{}, named(&log, "b", "a"), nil)
		b := newBreaker(t, store, kvbreaker.Settings{FailureThreshold: 1, RecoveryDelay: time.Minute, HoldLimit: time.Hour,
			SkipClockCheck: true, Observer: obs, Logger: slog.New(slog.DiscardHandler)})

		mustAllow(t, b, time.Time{})
		if _, err := b.Allow(ctx, "junk.example", time.Time{}); err != nil {
			t.Fatal(err)
		}
		for _, f := range []func(context.Context, string) error{b.Failure, b.ReachableFailure, b.Failure} {
			if err := f(ctx, host); err != nil {
				t.Fatal(err)
			}
		}
		v := mustAllow(t, b, time.Time{})
		mustAllow(t, b, v.HeldSince.Add(-2*time.Hour))
		time.Sleep(time.Minute)
		mustAllow(t, b, time.Time{})
		if err := b.Success(ctx, host); err != nil {
			t.Fatal(err)
		}
		if _, err := b.CheckClock(ctx); err != nil {
			t.Fatal(err)
		}

		got := log.take()
		a := slices.DeleteFunc(slices.Clone(got), func(l string) bool { return !strings.HasPrefix(l, "a ") })
		for _, want := range []string{
			"a decision inbox.example send", "a decision inbox.example hold", "a decision inbox.example drop", "a decision inbox.example probe",
			"a outcome inbox.example success", "a outcome inbox.example reachable-failure", "a outcome inbox.example failure",
			"a transition inbox.example closed->open", "a transition inbox.example open->half-open",
			"a start get inbox.example", "a done compare_and_swap inbox.example ok", "a done sample_clock  ok",
			"a clock-offset", "a anomaly junk.example undecodable",
		} {
			if !slices.Contains(a, want) {
				t.Errorf("the first observer never saw %q; it saw\n\t%s", want, strings.Join(a, "\n\t"))
			}
		}
		if want := both(a); !slices.Equal(got, want) {
			t.Errorf("composed observers logged\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
		}
	})
}
