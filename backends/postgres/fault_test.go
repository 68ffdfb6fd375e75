package postgres_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/pgtest"
)

// ownServer starts a server of the test's own, with the table.
func ownServer(t *testing.T) *pgtest.Server {
	t.Helper()
	srv := pgtest.MustStart(t)
	pool := newPool(t, srv.URL())
	if err := postgres.CreateTable(t.Context(), pool, table); err != nil {
		t.Fatal(err)
	}
	pool.Close()
	return srv
}

// TestServerKilledAndRestarted: while the server is dead every call fails
// fast as unreachable, naming the address; after a restart (crash recovery)
// the same store works again without being remade.
func TestServerKilledAndRestarted(t *testing.T) {
	srv := ownServer(t)
	st := isolate(t, mustNew(t, srv.URL()), uniquePrefix(t))
	ctx := t.Context()
	if _, err := st.CompareAndSwap(ctx, "a.example", driver.NoVersion, []byte("x"), time.Minute); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	// A minute's context against half of it tells a call that fails at
	// the refusal from one that keeps trying until its context ends; a
	// bound near the refusal's own time measured the machine's load.
	kctx, kcancel := context.WithTimeout(ctx, time.Minute)
	defer kcancel()
	start := time.Now()
	_, _, err := st.Get(kctx, "a.example")
	if !errors.Is(err, driver.ErrUnreachable) || !strings.Contains(err.Error(), "cannot reach postgres at "+srv.Addr()+": connection refused") {
		t.Errorf("Get with the server killed = %v, want unreachable at %s", err, srv.Addr())
	}
	if _, ok := errors.AsType[*driver.OpError](err); !ok {
		t.Errorf("Get with the server killed = %T, want a *driver.OpError", err)
	}
	if took := time.Since(start); took >= 30*time.Second {
		t.Errorf("took %v to report a dead server: it waited for its context", took)
	}
	_, err = st.CompareAndSwap(ctx, "b.example", driver.NoVersion, []byte("y"), time.Minute)
	if !errors.Is(err, driver.ErrUnreachable) || errors.Is(err, driver.ErrConflict) {
		t.Errorf("CompareAndSwap with the server killed = %v, want unreachable", err)
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	v, err := st.CompareAndSwap(ctx, "b.example", driver.NoVersion, []byte("y"), time.Minute)
	if err != nil {
		t.Fatalf("CompareAndSwap after restart = %v", err)
	}
	if got, ver, err := st.Get(ctx, "b.example"); err != nil || string(got) != "y" || ver != v {
		t.Errorf("Get after restart = %q, %d, %v; want y, %d", got, ver, err, v)
	}
}

// TestServerPaused: a server stopped with SIGSTOP answers nothing; a call is
// bounded by its context and says so, and the store works once it resumes.
func TestServerPaused(t *testing.T) {
	srv := ownServer(t)
	st := isolate(t, mustNew(t, srv.URL()), uniquePrefix(t))
	if _, err := st.CompareAndSwap(t.Context(), "a.example", driver.NoVersion, []byte("x"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = srv.Resume()
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := st.Get(ctx, "a.example")
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer from postgres at "+srv.Addr()) {
		t.Errorf("Get on a paused server = %v, want the context's deadline, saying no answer", err)
	}
	// pgx gives the server a cancel request, then closes the connection.
	// Far beyond the context, short of never: under load the call ends
	// late, but a call that waited for the server would not end at all.
	if took >= 15*time.Second {
		t.Errorf("Get on a paused server took %v with a 500ms context: it waited for the server, which answers nothing while paused", took)
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	if got, _, err := st.Get(t.Context(), "a.example"); err != nil || string(got) != "x" {
		t.Errorf("Get after resume = %q, %v", got, err)
	}
}

// TestLostAnswer: a create, a compare-and-swap and a compare-and-delete
// applied by the server whose answers the fault proxy drops are resent and
// recognised as the call's own: success, with the version the first
// attempt got (backendtest.LostAnswers).
func TestLostAnswer(t *testing.T) {
	p, err := faultproxy.Start(server.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	backendtest.LostAnswers(t, isolate(t, mustNew(t, server.URLFor(p.Addr())), uniquePrefix(t)), p)
}

// TestUnreachableFailsFast: a store over a port nobody listens on reports
// "cannot reach postgres at <host:port>: connection refused" at once, from
// Ping and from each of its calls, after one connection attempt.
func TestUnreachableFailsFast(t *testing.T) {
	dead := backendtest.ClosedPort(t)
	st := mustNew(t, server.URLFor(dead))
	pctx, pcancel := context.WithTimeout(t.Context(), time.Minute)
	defer pcancel()
	start := time.Now()
	err := st.Ping(pctx)
	want := "postgres: dial: cannot reach postgres at " + dead + ": connection refused"
	if !errors.Is(err, driver.ErrUnreachable) || err.Error() != want {
		t.Errorf("Ping = %v, want %q", err, want)
	}
	if !errors.Is(err, driver.ErrUnreachable) {
		t.Errorf("Ping = %v, want one matching driver.ErrUnreachable too", err)
	}
	if took := time.Since(start); took >= 30*time.Second {
		t.Errorf("took %v: Ping waited for its minute's context rather than fail at the refusal", took)
	}
	backendtest.Unreachable(t, endpointStore(dead))
}

// TestSilentEndpointBoundedByContext: a server that accepts connections
// and never answers costs each call its context's deadline, not more, and
// the error says that nobody answered.
func TestSilentEndpointBoundedByContext(t *testing.T) {
	addr, _ := backendtest.SilentListener(t)
	backendtest.Silent(t, endpointStore(addr))
}

// endpointStore is a store over the server at addr, through a pool of its
// own whose connection attempts are counted.
func endpointStore(addr string) backendtest.Endpoint {
	return backendtest.Endpoint{
		Backend: "postgres", Name: "postgres", URL: addr,
		New: func(t *testing.T) (driver.Store, func() int) {
			cfg, err := pgxpool.ParseConfig(server.URLFor(addr))
			if err != nil {
				t.Fatal(err)
			}
			var dials atomic.Int32
			dial := cfg.ConnConfig.DialFunc
			cfg.ConnConfig.DialFunc = func(ctx context.Context, network, a string) (net.Conn, error) {
				dials.Add(1)
				return dial(ctx, network, a)
			}
			pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			s, err := postgres.New(pool, table)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s, func() int { return int(dials.Load()) }
		},
	}
}

func mustNew(t *testing.T, url string, opts ...postgres.Option) *postgres.Store {
	t.Helper()
	s, err := postgres.New(newPool(t, url), table, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustGet(t *testing.T, s driver.Store, key string) driver.Version {
	t.Helper()
	_, v, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q) = %v", key, err)
	}
	return v
}
