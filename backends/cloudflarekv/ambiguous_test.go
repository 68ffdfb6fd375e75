package cloudflarekv

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cloudflare/cloudflare-go/v6/kv"
	"github.com/cloudflare/cloudflare-go/v6/option"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/faultfleet"
)

// The tests in this file put a faultproxy between the store and the shared
// Miniflare: the proxy forwards a write, lets Miniflare apply it, and then
// loses the answer (a reset connection) or replaces it with an HTTP 500.

// cf500 is a Cloudflare API error answer: cloudflare-go retries a 5xx.
var cf500 = func() []byte {
	body := `{"success":false,"errors":[{"code":10001,"message":"internal error"}],"messages":[],"result":null}`
	return fmt.Appendf(nil, "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
}()

var ambiguities = []struct {
	name string
	arm  func(*faultproxy.Proxy)
}{
	{"answer-500", func(p *faultproxy.Proxy) { p.FailNextAnswer(cf500) }},
	// The proxy is open for the whole test, and only a closed one refuses.
	{"answer-dropped", func(p *faultproxy.Proxy) { _ = p.DropNextAnswer(context.Background()) }},
}

// startProxy starts a faultproxy in front of the shared Miniflare.
func startProxy(t *testing.T) *faultproxy.Proxy {
	t.Helper()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// proxiedClient is a kv client whose requests go through p.
func proxiedClient(p *faultproxy.Proxy) *kv.KVService {
	return kv.NewKVService(option.WithBaseURL("http://"+p.Addr()+"/client/v4/"), option.WithAPIToken(srv.Token))
}

// proxiedStore returns a store through p under a fresh prefix, on
// Miniflare's clock, and flushes it when the test ends.
func proxiedStore(t *testing.T, p *faultproxy.Proxy, opts ...Option) *tstore {
	t.Helper()
	all := append([]Option{WithClock(srv.Now)}, opts...)
	s, err := New(proxiedClient(p), srv.AccountID, srv.NamespaceID, all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Heal()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Flush(ctx); err != nil {
			t.Errorf("Flush: %v", err)
		}
	})
	return prefixed(t, s, uniquePrefix(t.Name()))
}

// transitions records OnStateChange reports.
type transitions struct {
	mu  sync.Mutex
	got []string
}

func (tr *transitions) add(_ string, from, to kvbreaker.State) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.got = append(tr.got, from.String()+"→"+to.String())
}

func (tr *transitions) list() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.got)
}

// TestSDKRetryOfLostAnswer measures what cloudflare-go does with the
// store's default WithMaxRetries(1) when an applied PUT's answer is lost or
// replaced by a 500: it sends the same request once more (1.5 to 2 s later:
// its backoff is 2 s minus up to 25% jitter), KV applies the same envelope
// again, and the Failure is counted once.
func TestSDKRetryOfLostAnswer(t *testing.T) {
	for _, amb := range ambiguities {
		t.Run(amb.name, func(t *testing.T) {
			ctx := t.Context()
			p := startProxy(t)
			s := proxiedStore(t, p)
			b, err := kvbreaker.New(s, kvbreaker.Settings{FailureThreshold: 2, Clock: srv.Now, CallTimeout: 10 * time.Second, Logger: quiet, SkipClockCheck: true}) // counts the requests of one Failure
			if err != nil {
				t.Fatal(err)
			}
			const host = "sdk-retry.example"
			if _, err := b.Inspect(ctx, host); err != nil { // warm: the read is not the armed request
				t.Fatal(err)
			}
			before := p.Stats()
			amb.arm(p)
			start := time.Now()
			if err := b.Failure(ctx, host); err != nil {
				t.Fatalf("Failure with its answer lost once = %v, want nil (the SDK retries)", err)
			}
			elapsed := time.Since(start)
			after := p.Stats()
			if n := after.Requests - before.Requests; n != 2 {
				t.Errorf("%d requests through the proxy, want 2 (the PUT and the SDK's one retry)", n)
			}
			st, err := kvbreaker.New(sibling(t, s), kvbreaker.Settings{FailureThreshold: 2, Clock: srv.Now, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			got, err := st.Inspect(ctx, host)
			if err != nil || got.State != kvbreaker.StateClosed || len(got.Failures) != 1 {
				t.Errorf("after one Failure whose PUT was applied twice: %s %+v, %v; want closed with one failure", got.State, got, err)
			}
			// The request count pins the one retry; the upper bound only
			// catches a call that hangs, and must not measure the load.
			if elapsed < 1400*time.Millisecond || elapsed > 15*time.Second {
				t.Errorf("Failure took %v; cloudflare-go's first retry waits 1.5 to 2 s", elapsed)
			}
			t.Logf("%s: Failure returned after %v, %d requests", amb.name, elapsed.Round(time.Millisecond), after.Requests-before.Requests)
		})
	}
}

// TestAmbiguousWriteResent: when no answer comes back for an applied write
// (here with the SDK's retries off, so the one lost answer reaches the
// store), the store sends the same write again instead of failing its
// callers: the Failure is counted once and returns nil, and the probe's
// Success closes the circuit and reports half-open→closed. Returning the
// transport or HTTP 500 error instead would fail callers for writes that
// had taken effect, and half-open→closed would never be reported.
func TestAmbiguousWriteResent(t *testing.T) {
	for _, amb := range ambiguities {
		t.Run(amb.name, func(t *testing.T) {
			ctx := t.Context()
			p := startProxy(t)
			s := proxiedStore(t, p, WithMaxRetries(0))
			var tr transitions
			settings := kvbreaker.Settings{FailureThreshold: 2, RecoveryDelay: time.Minute, FailureWindow: time.Minute,
				Clock: srv.Now, CallTimeout: 10 * time.Second, Logger: quiet, OnStateChange: tr.add}
			b, err := kvbreaker.New(s, settings)
			if err != nil {
				t.Fatal(err)
			}
			const host = "resent.example"
			observe := func() kvbreaker.Status {
				t.Helper()
				o, err := kvbreaker.New(sibling(t, s), settings)
				if err != nil {
					t.Fatal(err)
				}
				st, err := o.Inspect(ctx, host)
				if err != nil {
					t.Fatal(err)
				}
				return st
			}

			if _, err := b.Inspect(ctx, host); err != nil { // warm: the read is not the armed request
				t.Fatal(err)
			}
			amb.arm(p)
			if err := b.Failure(ctx, host); err != nil {
				t.Errorf("Failure whose applied PUT lost its answer = %v, want nil", err)
			}
			if st := observe(); st.State != kvbreaker.StateClosed || len(st.Failures) != 1 {
				t.Errorf("after one Failure: %s %+v; want closed with one failure", st.State, st)
			}
			if err := b.Failure(ctx, host); err != nil {
				t.Fatal(err)
			}
			if err := srv.Advance(ctx, settings.RecoveryDelay); err != nil {
				t.Fatal(err)
			}
			if v, err := b.Allow(ctx, host, time.Time{}); err != nil || v.Decision != kvbreaker.Probe {
				t.Fatalf("Allow after the recovery delay = %v, %v; want probe", v.Decision, err)
			}
			amb.arm(p)
			if err := b.Success(ctx, host); err != nil {
				t.Errorf("the probe's Success whose applied DELETE lost its answer = %v, want nil", err)
			}
			if st := observe(); st.State != kvbreaker.StateClosed || st.Found {
				t.Errorf("after the probe's Success: %s %+v; want no record", st.State, st)
			}
			want := []string{"closed→open", "open→half-open", "half-open→closed"}
			if got := tr.list(); !slices.Equal(got, want) {
				t.Errorf("OnStateChange reported %v, want %v", got, want)
			}
		})
	}
}

// TestFaultFleet runs a Breaker fleet over Miniflare through a faultproxy
// that loses and fails answers of applied requests, delays, resets and
// blackholes, and checks with faultfleet what a last-writer-wins store
// still owes (faultfleet.ChecksFor: no failure counted twice, every probe
// winner told Probe, every opening reported, every call within
// CallTimeout; a single probe and single transitions are not promised).
// Each worker has its own store and client, as a separate process would.
func TestFaultFleet(t *testing.T) {
	p := startProxy(t)
	prefix := uniquePrefix(t.Name())
	observerStore, err := New(client(), srv.AccountID, srv.NamespaceID, WithCache(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	observer := prefixed(t, observerStore, prefix)
	var stores []*Store
	t.Cleanup(func() {
		p.Heal()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, s := range stores {
			if err := s.Flush(ctx); err != nil {
				t.Errorf("Flush: %v", err)
			}
		}
	})
	rep, err := faultfleet.Run(t.Context(), faultfleet.Config{
		NewStore: func(context.Context, int) (driver.Store, error) {
			s, err := New(proxiedClient(p), srv.AccountID, srv.NamespaceID)
			if err != nil {
				return nil, err
			}
			stores = append(stores, s)
			return kvbreaker.Prefixed(s, prefix)
		},
		Observer:   observer,
		Proxy:      p,
		FailAnswer: cf500,
		Short:      testing.Short(),
		Duration:   10 * time.Second,
		Hosts:      8,
		// Workers KV takes one write per second per key: calls wait for
		// their coalesced write, and circuits need longer than the
		// faultfleet defaults to open and probe.
		Settings: kvbreaker.Settings{Logger: quiet, CallTimeout: 3 * time.Second, FailureWindow: 10 * time.Second, RecoveryDelay: 2 * time.Second},
		Logf:     t.Logf,
	})
	t.Log(rep)
	if err != nil { // includes faultfleet.ErrNoPower: no answer was lost
		t.Fatal(err)
	}
}
