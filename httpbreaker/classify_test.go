package httpbreaker_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/httpbreaker"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestDoAndTransportClassifyAlike: one error means one outcome, whether a
// delivery goes through Breaker.Do or through a Transport. Each row's error
// is what fn returns to Do and what the base transport returns to the
// Transport (nil: a base 200 from a base server). The host starts with one
// failure, so the outcome shows in the record: Failure adds one, Ignore
// keeps it, Success and ReachableFailure delete it; the Transport's own
// Classify call is checked against the outcome too.
func TestDoAndTransportClassifyAlike(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	host, err := kvbreaker.HostKey(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	for _, tc := range []struct {
		name string
		// deliver returns the delivery's error under ctx; cancel is ctx's.
		deliver func(ctx context.Context, cancel context.CancelCauseFunc) error
		timeout bool
		want    kvbreaker.Outcome
	}{
		{name: "nil", deliver: func(context.Context, context.CancelCauseFunc) error { return nil }, want: kvbreaker.Success},
		{name: "reachable", deliver: func(context.Context, context.CancelCauseFunc) error {
			return kvbreaker.Reachable(errors.New("422 rejected"))
		}, want: kvbreaker.ReachableFailure},
		{name: "plain", deliver: func(context.Context, context.CancelCauseFunc) error { return errors.New("connection reset") }, want: kvbreaker.Failure},
		{name: "deadline", timeout: true, deliver: func(ctx context.Context, _ context.CancelCauseFunc) error {
			<-ctx.Done()
			return ctx.Err()
		}, want: kvbreaker.Failure},
		{name: "cancelled-with-cause", deliver: func(ctx context.Context, cancel context.CancelCauseFunc) error {
			cancel(errors.New("sibling failed"))
			return context.Cause(ctx)
		}, want: kvbreaker.Ignore},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call := func(t *testing.T, through func(ctx context.Context, cancel context.CancelCauseFunc, b *kvbreaker.Breaker)) kvbreaker.Status {
				c := newClock()
				b := newBreaker(t, memory.New(memory.WithClock(c.Now)), c)
				if err := b.Failure(t.Context(), host); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancelCause(t.Context())
				defer cancel(nil)
				if tc.timeout {
					var stop context.CancelFunc
					ctx, stop = context.WithTimeout(ctx, 20*time.Millisecond)
					defer stop()
				}
				through(ctx, cancel, b)
				st, err := b.Inspect(t.Context(), host)
				if err != nil {
					t.Fatal(err)
				}
				return st
			}
			viaDo := call(t, func(ctx context.Context, cancel context.CancelCauseFunc, b *kvbreaker.Breaker) {
				_ = b.Do(ctx, host, func(ctx context.Context) error { return tc.deliver(ctx, cancel) })
			})
			classified := kvbreaker.Ignore // stays so when Classify is not called
			viaTransport := call(t, func(ctx context.Context, cancel context.CancelCauseFunc, b *kvbreaker.Breaker) {
				tr := &httpbreaker.Transport{Breaker: b,
					Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
						if err := tc.deliver(r.Context(), cancel); err != nil {
							return nil, err
						}
						return base.RoundTrip(r)
					}),
					Classify: func(resp *http.Response, err error) kvbreaker.Outcome {
						classified = httpbreaker.DefaultClassify(resp, err)
						return classified
					},
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
				if err != nil {
					t.Fatal(err)
				}
				if resp, err := tr.RoundTrip(req); err == nil {
					_ = resp.Body.Close()
				}
			})
			want := map[kvbreaker.Outcome]int{kvbreaker.Success: 0, kvbreaker.ReachableFailure: 0, kvbreaker.Failure: 2, kvbreaker.Ignore: 1}[tc.want]
			if len(viaDo.Failures) != want || len(viaTransport.Failures) != want {
				t.Errorf("failures after one delivery: Do %d, Transport %d; want %d (%v)", len(viaDo.Failures), len(viaTransport.Failures), want, tc.want)
			}
			if classified != tc.want {
				t.Errorf("Transport classified %v, want %v", classified, tc.want)
			}
		})
	}
}
