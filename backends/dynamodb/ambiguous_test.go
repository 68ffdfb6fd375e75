package dynamodb_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/fleettest"
)

// The tests in this file put a faultproxy between the adapter and the
// shared dynalite: the proxy forwards a write, lets dynalite apply it, and
// then loses the answer (a reset connection) or replaces it with an HTTP 500.
// The SDK retries the write, the retry's condition fails because of the
// write's own first attempt, and the adapter must recognise its own write.

// http500 is what DynamoDB sends for an internal failure: the SDK retries it.
var http500 = []byte("HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: 86\r\nConnection: close\r\n\r\n" +
	`{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"failure"}` + "\n")

// ambiguity is one way of losing an applied write's answer.
type ambiguity struct {
	name string
	arm  func(*faultproxy.Proxy)
}

var ambiguities = []ambiguity{
	{"answer-500", func(p *faultproxy.Proxy) { p.FailNextAnswer(http500) }},
	// The proxy is open for the whole test, and only a closed one refuses.
	{"answer-dropped", func(p *faultproxy.Proxy) { _ = p.DropNextAnswer(context.Background()) }},
}

// proxied starts a faultproxy in front of the shared dynalite and returns it
// with a client through it. The client retries like the SDK's standard
// retryer (3 attempts) without its backoff wait; between attempts it calls
// between, if set, with the attempt number, so a test can act as another
// worker while the retry is pending.
func proxied(t *testing.T, between func(attempt int)) (*faultproxy.Proxy, *dyn.Client) {
	t.Helper()
	p, err := faultproxy.Start(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	c := newClient("http://"+p.Addr(), func(o *dyn.Options) {
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = 3
			so.Backoff = retry.BackoffDelayerFunc(func(attempt int, _ error) (time.Duration, error) {
				if between != nil {
					between(attempt)
				}
				return time.Millisecond, nil
			})
		})
	})
	return p, c
}

// lost checks the proxy really lost exactly the answers the test armed:
// without that the test proves nothing.
func lost(t *testing.T, p *faultproxy.Proxy, want int) {
	t.Helper()
	st := p.Stats()
	if got := st.Dropped + st.Failed; got != want {
		t.Fatalf("the proxy lost %d answers (%+v), want %d: the fault did not happen", got, st, want)
	}
}

// TestAmbiguousWriteIsOwnSuccess: a write dynalite applied but whose answer
// was lost, retried by the SDK, returns what the first answer would have
// said. Taken at face value, the retry's answer is a conflict carrying the
// call's own write (or, for a delete, ErrNotFound), and the caller would
// take its own write for another worker's.
func TestAmbiguousWriteIsOwnSuccess(t *testing.T) {
	for _, amb := range ambiguities {
		t.Run(amb.name, func(t *testing.T) {
			ctx := t.Context()
			prefix := uniquePrefix(t)
			p, c := proxied(t, nil)
			s := newPrefixed(t, c, prefix)
			direct := newPrefixed(t, client, prefix)

			amb.arm(p)
			v1, err := s.CompareAndSwap(ctx, "h.example", driver.NoVersion, []byte("one"), hour)
			if err != nil {
				t.Fatalf("create whose answer was lost: %v; want success with the version it wrote", err)
			}
			lost(t, p, 1)
			if _, got := mustGet(t, direct, "h.example"); got != v1 {
				t.Fatalf("create returned version %d, the store holds %d", v1, got)
			}

			amb.arm(p)
			v2, err := s.CompareAndSwap(ctx, "h.example", v1, []byte("two"), hour)
			if err != nil {
				t.Fatalf("swap whose answer was lost: %v; want success with the version it wrote", err)
			}
			lost(t, p, 2)
			if v, got := mustGet(t, direct, "h.example"); got != v2 || string(v) != "two" {
				t.Fatalf("swap returned version %d, the store holds %q v%d", v2, v, got)
			}

			amb.arm(p)
			if err := s.CompareAndDelete(ctx, "h.example", v2); err != nil {
				t.Fatalf("delete whose answer was lost: %v; want success", err)
			}
			lost(t, p, 3)
			mustAbsent(t, direct, "h.example")
			// A conflict that is not ours still is one.
			amb.arm(p)
			if _, err := s.CompareAndSwap(ctx, "h.example", v2, []byte("stale"), hour); !errors.Is(err, driver.ErrConflict) {
				t.Fatalf("stale swap through a lost answer = %v, want a conflict", err)
			}
			if err := s.CompareAndDelete(ctx, "h.example", v2); !errors.Is(err, driver.ErrNotFound) {
				t.Fatalf("delete of a key another call deleted = %v, want ErrNotFound", err)
			}
		})
	}
}

// TestAmbiguousWriteReplacedBeforeRetry: between the lost answer and the
// SDK's retry another worker replaces (or deletes) the write. The write did
// happen, and the item's history says so. Answered instead with a conflict
// carrying the other worker's write, Breaker would apply its step a second
// time on top of its own.
func TestAmbiguousWriteReplacedBeforeRetry(t *testing.T) {
	for _, tc := range []struct {
		name   string
		others int // writes by another worker before the retry
		del    bool
		want   string // "ours" or "conflict"
	}{
		{"one-other-write", 1, false, "ours"},
		{"four-other-writes", 4, false, "ours"},
		{"other-worker-deletes", 1, true, "ours"},
		// Negative control: past the history's depth the evidence is gone
		// and the adapter must not guess.
		{"five-other-writes-is-a-conflict", 5, false, "conflict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			prefix := uniquePrefix(t)
			direct := newPrefixed(t, client, prefix)
			var otherErr error
			p, c := proxied(t, func(attempt int) {
				if attempt != 1 {
					return
				}
				// Another worker, not through the proxy, sees the applied
				// write and builds on it.
				_, ver, err := direct.Get(ctx, "h.example")
				for i := 0; i < tc.others && err == nil; i++ {
					if tc.del {
						err = direct.CompareAndDelete(ctx, "h.example", ver)
						continue
					}
					ver, err = direct.CompareAndSwap(ctx, "h.example", ver, []byte(fmt.Sprint("other", i)), hour)
				}
				otherErr = err
			})
			s := newPrefixed(t, c, prefix)
			for _, old := range []string{"create", "swap"} {
				t.Run(old, func(t *testing.T) {
					base := driver.NoVersion
					if old == "swap" {
						base = mustCAS(t, direct, "h.example", driver.NoVersion, "base", hour)
					}
					before := p.Stats()
					p.FailNextAnswer(http500)
					ver, err := s.CompareAndSwap(ctx, "h.example", base, []byte("mine"), hour)
					if otherErr != nil {
						t.Fatal(otherErr)
					}
					if st := p.Stats(); st.Failed != before.Failed+1 {
						t.Fatalf("no answer was failed (%+v): the test proves nothing", st)
					}
					switch tc.want {
					case "ours":
						if err != nil {
							t.Fatalf("CompareAndSwap = %v; want success: the item's history holds this call's version", err)
						}
						if ver == driver.NoVersion {
							t.Fatal("success without a version")
						}
					case "conflict":
						if !errors.Is(err, driver.ErrConflict) {
							t.Fatalf("CompareAndSwap = %v, %v; want a conflict", ver, err)
						}
					}
					// The retried create must not have been applied again
					// over the other worker's delete.
					if tc.del {
						mustAbsent(t, direct, "h.example")
					}
					// Clean up for the next subtest.
					if _, cur, err := direct.Get(ctx, "h.example"); err == nil {
						if err := direct.CompareAndDelete(ctx, "h.example", cur); err != nil {
							t.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// TestAmbiguousBreaker runs Breakers over stores whose answers the proxy
// loses after dynalite applied the write. Each subtest pins what goes wrong
// when the SDK's retry of the applied write is taken at face value:
//   - one-failure-counted-once: the retried create conflicts with its own
//     record, Breaker recomputes on it and writes the failure again; the
//     threshold-2 circuit opens after one failure.
//   - probe-winner-gets-probe: the retried half-open write conflicts with
//     itself and the winner is told Hold; open→half-open is never reported.
//   - success-reports-close: the retried delete finds the key gone and
//     Breaker takes it for another worker's close; half-open→closed is never
//     reported.
func TestAmbiguousBreaker(t *testing.T) {
	const host = "inbox.example"
	start := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for _, amb := range ambiguities {
		t.Run(amb.name, func(t *testing.T) {
			// setup returns a fleet of two Breakers on one clock at start:
			// the worker, over a store whose next write p arms the proxy
			// for, and an observer over the shared dynalite directly.
			setup := func(t *testing.T, threshold int) (p *armWrites, worker, observer *kvbreaker.Breaker, f *fleettest.Fleet) {
				pr, c := proxied(t, nil)
				clk := &fleettest.Clock{}
				clk.Set(start)
				prefix := uniquePrefix(t)
				p = &armWrites{proxy: pr, arm: func() { amb.arm(pr) }}
				p.Store = newPrefixed(t, c, prefix, dynamodb.WithClock(clk.Now))
				direct := newPrefixed(t, client, prefix, dynamodb.WithClock(clk.Now))
				f = fleettest.NewOn(t, clk, []driver.Store{p, direct}, kvbreaker.Settings{
					FailureThreshold: threshold, FailureWindow: time.Minute, RecoveryDelay: 30 * time.Second,
				})
				return p, f.Breakers[0], f.Breakers[1], f
			}

			t.Run("one-failure-counted-once", func(t *testing.T) {
				ctx := t.Context()
				p, b, observer, f := setup(t, 2)
				p.armNextWrite()
				if err := b.Failure(ctx, host); err != nil {
					t.Fatal(err)
				}
				lost(t, p.proxy, 1)
				st, err := observer.Inspect(ctx, host)
				if err != nil {
					t.Fatal(err)
				}
				if st.State != kvbreaker.StateClosed || len(st.Failures) != 1 {
					t.Fatalf("after one failure: %v with failures %v; want closed with one", st.State, st.Failures)
				}
				// No closed→open (nor any other transition) after one failure.
				f.Tr.Want(t, map[string]int{})
			})

			t.Run("probe-winner-gets-probe", func(t *testing.T) {
				ctx := t.Context()
				p, b, observer, f := setup(t, 1)
				if err := b.Failure(ctx, host); err != nil {
					t.Fatal(err)
				}
				st, err := observer.Inspect(ctx, host)
				if err != nil || st.State != kvbreaker.StateOpen {
					t.Fatalf("after the failure: %+v, %v; want open", st, err)
				}
				f.Tr.Want(t, map[string]int{"closed→open": 1})
				f.Clock.Set(st.RestrainedUntil)
				p.armNextWrite()
				v, err := b.Allow(ctx, host, time.Time{})
				if err != nil || v.Decision != kvbreaker.Probe {
					t.Fatalf("the election's only candidate got %v (err %v); want probe", v.Decision, err)
				}
				lost(t, p.proxy, 1)
				f.Tr.Want(t, map[string]int{"open→half-open": 1})
				// Nobody else probes this restraint.
				if v, err := observer.Allow(ctx, host, time.Time{}); err != nil || v.Decision != kvbreaker.Hold {
					t.Fatalf("another worker got %v (err %v) during the probe; want hold", v.Decision, err)
				}
			})

			t.Run("success-reports-close", func(t *testing.T) {
				ctx := t.Context()
				p, b, observer, f := setup(t, 1)
				if err := b.Failure(ctx, host); err != nil {
					t.Fatal(err)
				}
				st, _ := observer.Inspect(ctx, host)
				f.Clock.Set(st.RestrainedUntil)
				if v, err := b.Allow(ctx, host, time.Time{}); err != nil || v.Decision != kvbreaker.Probe {
					t.Fatalf("probe: %v, %v", v.Decision, err)
				}
				p.armNextWrite()
				if err := b.Success(ctx, host); err != nil {
					t.Fatal(err)
				}
				lost(t, p.proxy, 1)
				f.Tr.Want(t, map[string]int{"closed→open": 1, "open→half-open": 1, "half-open→closed": 1})
				if st, err := observer.Inspect(ctx, host); err != nil || st.Found {
					t.Fatalf("after the success: %+v, %v; want no record", st, err)
				}
			})
		})
	}
}

// armWrites arms the proxy just before the next CompareAndSwap or
// CompareAndDelete, so the fault hits the write rather than the read a
// Breaker call starts with.
type armWrites struct {
	driver.Store
	proxy *faultproxy.Proxy
	arm   func()
	armed atomic.Bool
}

func (w *armWrites) armNextWrite() { w.armed.Store(true) }

func (w *armWrites) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	if w.armed.Swap(false) {
		w.arm()
	}
	return w.Store.CompareAndSwap(ctx, key, old, value, ttl)
}

func (w *armWrites) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	if w.armed.Swap(false) {
		w.arm()
	}
	return w.Store.CompareAndDelete(ctx, key, old)
}
