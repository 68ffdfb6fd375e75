package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/faultfleet"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// TestFaultFleet runs a Breaker fleet over Redis through a faultproxy that
// loses and fails answers of applied requests, delays, resets and
// blackholes, and checks with faultfleet that no failure is counted twice,
// every probe winner is told Probe, every opening and transition is
// reported once, and every call returns within CallTimeout. Each worker has
// its own client, as a separate process would.
func TestFaultFleet(t *testing.T) {
	p, err := faultproxy.Start(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	prefix := uniquePrefix(t)
	observer := newStoreUnder(t, newClient(t, srv.Addr()), prefix)
	rep, err := faultfleet.Run(t.Context(), faultfleet.Config{
		NewStore: func(context.Context, int) (driver.Store, error) {
			return newStoreUnder(t, newClient(t, p.Addr(), func(o *goredis.Options) {
				o.MinRetryBackoff, o.MaxRetryBackoff = time.Millisecond, 20*time.Millisecond
			}), prefix), nil
		},
		Observer: observer,
		Proxy:    p,
		// A RESP error, as a server in trouble sends it: go-redis does not
		// retry it, so the write's outcome is unknown to the worker.
		FailAnswer: []byte("-ERR injected failure\r\n"),
		Short:      testing.Short(),
		Logf:       t.Logf,
	})
	t.Log(rep)
	if err != nil {
		t.Fatal(err)
	}
}

// TestServerFaults: with its own server, a store reports a killed server as
// an *driver.OpError within the call's context, a paused (SIGSTOP) server
// as the context's deadline, and works again once the server is resumed or
// restarted (empty: nothing is persisted), with versions above every
// version it gave before.
func TestServerFaults(t *testing.T) {
	s := redistest.MustStart(t)
	st := newRaw(t, s.Addr(), func(o *goredis.Options) { o.MaxRetries = 1 })
	ctx := t.Context()
	const key = "fault.example"
	v1, err := st.CompareAndSwap(ctx, key, driver.NoVersion, []byte("a"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	call := func(what string) error {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, _, err := st.Get(cctx, key)
		// Far beyond the context, short of never: under load the call
		// ends late, but one that waited for a paused server would not
		// end at all.
		if d := time.Since(start); d >= 15*time.Second {
			t.Errorf("%s: Get took %v, far beyond its 500 ms context", what, d)
		}
		return err
	}

	// Paused: the call ends with its context.
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	err = call("paused")
	var oe *driver.OpError
	if !errors.As(err, &oe) || oe.Backend != "redis" || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get on a paused server = %v, want a redis *driver.OpError matching context.DeadlineExceeded", err)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if got, ver, err := st.Get(ctx, key); err != nil || string(got) != "a" || ver != v1 {
		t.Errorf("after Resume Get = %q, %d, %v; want a, %d", got, ver, err, v1)
	}

	// Killed: an OpError, not ErrNotFound.
	s.Kill()
	err = call("killed")
	if !errors.As(err, &oe) || errors.Is(err, driver.ErrNotFound) {
		t.Errorf("Get on a killed server = %v, want a *driver.OpError", err)
	}
	t.Logf("killed: %v", err)

	// Restarted, empty: the key is gone and a new write's version is above
	// every earlier one (the server's clock has moved on).
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Get(ctx, key); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("after Restart Get = %v, want ErrNotFound (nothing persisted)", err)
	}
	v2, err := st.CompareAndSwap(ctx, key, driver.NoVersion, []byte("b"), time.Minute)
	if err != nil || v2 <= v1 {
		t.Errorf("after Restart CompareAndSwap = %d, %v; want a version above %d", v2, err, v1)
	}
}

// TestLostAnswerNotRetried: with go-redis' retries off (MaxRetries -1) a
// script whose answer was lost returns the transport error (outcome
// unknown), and the write was applied; with them on (the default) the
// same fault returns the write's own version. The proxy really lost each
// answer.
func TestLostAnswerNotRetried(t *testing.T) {
	p, err := faultproxy.Start(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	ctx := t.Context()
	prefix := uniquePrefix(t)
	noRetry := newStoreUnder(t, newClient(t, p.Addr(), func(o *goredis.Options) { o.MaxRetries = -1 }), prefix)
	retry := newStoreUnder(t, newClient(t, p.Addr()), prefix)
	direct := newStoreUnder(t, newClient(t, srv.Addr()), prefix)

	// Warm both clients' connections: the proxy's first request on a new
	// connection is go-redis' HELLO handshake, not the script.
	for _, st := range []driver.Store{noRetry, retry} {
		if _, _, err := st.Get(ctx, "warm.example"); !errors.Is(err, driver.ErrNotFound) {
			t.Fatal(err)
		}
	}
	if err := p.DropNextAnswer(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = noRetry.CompareAndSwap(ctx, "a.example", driver.NoVersion, []byte("x"), time.Minute)
	var oe *driver.OpError
	if !errors.As(err, &oe) || errors.Is(err, driver.ErrConflict) {
		t.Errorf("lost answer without retries: %v, want a *driver.OpError (outcome unknown)", err)
	}
	if got, _, err := direct.Get(ctx, "a.example"); err != nil || string(got) != "x" {
		t.Errorf("the write whose answer was lost: Get = %q, %v; want it applied", got, err)
	}

	if err := p.DropNextAnswer(ctx); err != nil {
		t.Fatal(err)
	}
	v, err := retry.CompareAndSwap(ctx, "b.example", driver.NoVersion, []byte("y"), time.Minute)
	if err != nil {
		t.Fatalf("lost answer with retries: %v, want the write's own version", err)
	}
	if _, cur, err := direct.Get(ctx, "b.example"); err != nil || cur != v {
		t.Errorf("Get = version %d, %v; want %d", cur, err, v)
	}
	if st := p.Stats(); st.Dropped != 2 {
		t.Fatalf("the proxy dropped %d answers (%+v), want 2: the fault did not happen", st.Dropped, st)
	}
}

// TestDialUnreachable: Dial to a port where nothing listens fails within
// ConnectTimeout, saying "cannot reach redis at <addr>: connection
// refused", matching driver.ErrUnreachable; to a paused server it fails when ctx
// ends, saying it did not answer.
func TestDialUnreachable(t *testing.T) {
	s := redistest.MustStart(t)
	addr := s.Addr()
	s.Kill()
	// The context's minute against half of it tells a Dial that fails at
	// the refusal from one that keeps trying until its context ends; a
	// bound near the refusal's own time (ConnectTimeout) measured the
	// machine's load instead.
	dctx, dcancel := context.WithTimeout(t.Context(), time.Minute)
	defer dcancel()
	start := time.Now()
	_, err := redis.Dial(dctx, "redis://"+addr+"/0")
	if d := time.Since(start); d >= 30*time.Second {
		t.Errorf("Dial to a closed port took %v: it waited for its context rather than fail at the refusal", d)
	}
	want := "redis: dial: cannot reach redis at " + addr + ": connection refused"
	if err == nil || err.Error() != want || !errors.Is(err, driver.ErrUnreachable) {
		t.Errorf("Dial to a closed port = %v, want %q matching driver.ErrUnreachable", err, want)
	}
	if !errors.Is(err, driver.ErrUnreachable) {
		t.Errorf("Dial to a closed port = %v, want one matching driver.ErrUnreachable too", err)
	}

	if err := s.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Resume() }()
	ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
	defer cancel()
	_, err = redis.Dial(ctx, "redis://:secret@"+addr+"/0")
	if !errors.Is(err, driver.ErrUnreachable) || !containsAll(err.Error(), "cannot reach redis at "+addr, "did not answer") || containsAll(err.Error(), "secret") {
		t.Errorf("Dial to a paused server = %v, want driver.ErrUnreachable saying it did not answer, without the password", err)
	}
}

func TestDial(t *testing.T) {
	st, err := redis.Dial(t.Context(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	b, err := kvbreaker.New(st, kvbreaker.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(t.Context()); err != nil { // closes the client Dial made
		t.Fatal(err)
	}
	if _, _, err := st.Get(t.Context(), "x"); !errors.Is(err, redis.ErrClosed) {
		t.Errorf("Get after Close = %v, want ErrClosed", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !contains(s, sub) {
			return false
		}
	}
	return true
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
