package httpbreaker_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/httpbreaker"
)

// slowServer answers only when its request's context ends; started
// receives one value per request that reached it.
func slowServer(t testing.TB) (*httptest.Server, chan struct{}) {
	t.Helper()
	started := make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv, started
}

// onStart runs fn once the server has the request (a value on started),
// unless the request ends first (when it was held, say): call the returned
// func once the request has returned.
func onStart(started <-chan struct{}, fn func()) (returned func()) {
	done := make(chan struct{})
	go func() {
		select {
		case <-started:
			fn()
		case <-done:
		}
	}()
	return func() { close(done) }
}

// TestCancelledWithCauseRecordsNothing: a request cancelled with a cause
// (context.WithCancelCause) is the caller's choice, like one cancelled
// without: the host is not charged.
func TestCancelledWithCauseRecordsNothing(t *testing.T) {
	f := newFixture(t)
	srv, started := slowServer(t)
	shutdown := errors.New("shutting down")
	for range threshold + 1 {
		ctx, cancel := context.WithCancelCause(t.Context())
		returned := onStart(started, func() { cancel(shutdown) })
		_, err := f.get(t, ctx, srv.URL)
		returned()
		cancel(nil)
		if err == nil {
			t.Fatal("a cancelled request succeeded")
		}
	}
	if st := f.state(t, srv.URL); st.Found {
		t.Fatalf("requests cancelled with a cause were charged: %+v", st)
	}
}

// group is errgroup.WithContext's cancellation (the root module does not
// require golang.org/x/sync): the first error cancels the group's context
// with that error as its cause.
type group struct {
	wg     sync.WaitGroup
	once   sync.Once
	err    error
	cancel context.CancelCauseFunc
}

func withGroup(ctx context.Context) (*group, context.Context) {
	ctx, cancel := context.WithCancelCause(ctx)
	return &group{cancel: cancel}, ctx
}

func (g *group) Go(f func() error) {
	g.wg.Go(func() {
		if err := f(); err != nil {
			g.once.Do(func() { g.err = err; g.cancel(err) })
		}
	})
}

func (g *group) Wait() error { g.wg.Wait(); g.cancel(g.err); return g.err }

// TestErrgroupSiblingFailureChargesOnlyTheDeadHost: a batch to a slow,
// healthy host and a dead one; the dead host's failure cancels the batch's
// context with that failure as its cause. Only the dead host is charged.
func TestErrgroupSiblingFailureChargesOnlyTheDeadHost(t *testing.T) {
	f := newFixture(t)
	slow, started := slowServer(t)
	dead := refusedURL(t)
	for range threshold + 1 {
		g, ctx := withGroup(t.Context())
		inFlight := make(chan struct{})
		returned := onStart(started, func() { close(inFlight) })
		g.Go(func() error {
			_, err := f.get(t, ctx, slow.URL)
			returned()
			return err
		})
		g.Go(func() error {
			select {
			case <-inFlight: // the healthy host's request is in flight
			case <-ctx.Done():
			}
			_, err := f.get(t, ctx, dead)
			return err
		})
		if err := g.Wait(); err == nil {
			t.Fatal("the batch succeeded")
		}
	}
	if st := f.state(t, slow.URL); st.Found {
		t.Fatalf("the healthy host was charged for its sibling's failure: %+v", st)
	}
	// Control: the dead host's failures were recorded.
	if st := f.state(t, dead); st.State != kvbreaker.StateOpen {
		t.Fatalf("dead host: %+v, want open", st)
	}
}

// TestCancelledProbeReleasesClaim: a probe whose caller gives up releases
// its claim, so the next request, from any worker, probes at once instead
// of being held for the RecoveryDelay.
func TestCancelledProbeReleasesClaim(t *testing.T) {
	f := newFixture(t)
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	other := &fixture{clock: f.clock, store: f.store, breaker: newBreaker(t, f.store, f.clock)}
	other.client = &http.Client{Transport: &httpbreaker.Transport{Base: base, Breaker: other.breaker}}
	var failing atomic.Bool
	failing.Store(true)
	started := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		started <- struct{}{}
		<-r.Context().Done()
	}))
	defer srv.Close()
	for range threshold {
		if _, err := f.get(t, t.Context(), srv.URL); err != nil {
			t.Fatal(err)
		}
	}
	if st := f.state(t, srv.URL); st.State != kvbreaker.StateOpen {
		t.Fatalf("after %d 503s: %v, want open", threshold, st.State)
	}
	failing.Store(false)
	f.clock.Advance(recovery)
	cancelled := func(c *fixture) error {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() {
			select {
			case <-started:
				cancel() // the worker shuts down mid-probe
			case <-ctx.Done():
			}
		}()
		_, err := c.get(t, ctx, srv.URL)
		return err
	}
	if err := cancelled(f); !errors.Is(err, context.Canceled) {
		t.Fatalf("probe: err = %v, want cancelled", err)
	}
	st := f.state(t, srv.URL)
	if st.Probing || !st.RestrainedUntil.Equal(f.clock.Now()) || len(st.Failures) != threshold {
		t.Fatalf("after the cancelled probe: %+v, want open with the restraint ending now", st)
	}
	// The next worker probes at once: its request reaches the server.
	if err := cancelled(other); !errors.Is(err, context.Canceled) || errors.Is(err, kvbreaker.ErrHeld) {
		t.Fatalf("next worker: err = %v, want its probe sent (and cancelled)", err)
	}
}
