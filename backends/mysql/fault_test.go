package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/kvbreaker/kvbreaker/backends/mysql"
	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/mariadbtest"
)

// ownServer starts a server of the test's own, with the table.
func ownServer(t *testing.T) *mariadbtest.Server {
	t.Helper()
	srv := mariadbtest.MustStart(t)
	db := newDB(t, srv.DSN())
	if err := mysql.CreateTable(t.Context(), db, table); err != nil {
		t.Fatal(err)
	}
	db.Close()
	return srv
}

// TestServerKilledAndRestarted: while the server is dead every call fails
// fast as unreachable, naming the address; after a restart (crash recovery)
// the same store works again without being remade, and what was committed
// before the kill is there.
func TestServerKilledAndRestarted(t *testing.T) {
	srv := ownServer(t)
	st := isolate(t, mustNew(t, srv.DSN(), mysql.WithEndpoint(srv.Addr())), uniquePrefix(t))
	ctx := t.Context()
	va, err := st.CompareAndSwap(ctx, "a.example", driver.NoVersion, []byte("x"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	// A minute's context against half of it tells a call that fails at
	// the refusal from one that keeps trying until its context ends; a
	// bound near the refusal's own time measured the machine's load.
	kctx, kcancel := context.WithTimeout(ctx, time.Minute)
	defer kcancel()
	start := time.Now()
	_, _, err = st.Get(kctx, "a.example")
	if !errors.Is(err, driver.ErrUnreachable) || !strings.Contains(err.Error(), "cannot reach mysql at "+srv.Addr()+": connection refused") {
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
	if got, ver, err := st.Get(ctx, "a.example"); err != nil || string(got) != "x" || ver != va {
		t.Errorf("Get of the write before the kill = %q, %d, %v; want x, %d", got, ver, err, va)
	}
}

// TestServerPaused: a server stopped with SIGSTOP answers nothing; a call is
// bounded by its context and says so, and the store works once it resumes.
func TestServerPaused(t *testing.T) {
	srv := ownServer(t)
	st := isolate(t, mustNew(t, srv.DSN(), mysql.WithEndpoint(srv.Addr())), uniquePrefix(t))
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
	for _, call := range []string{"get", "swap"} {
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		start := time.Now()
		var err error
		switch call {
		case "get":
			_, _, err = st.Get(ctx, "a.example")
		case "swap":
			_, err = st.CompareAndSwap(ctx, "b.example", driver.NoVersion, []byte("y"), time.Minute)
		}
		took := time.Since(start)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer from mysql at "+srv.Addr()) {
			t.Errorf("%s on a paused server = %v, want the context's deadline, saying no answer", call, err)
		}
		// Far beyond the context, short of never: under load the call ends
		// late, but a call that waited for the server would not end at all.
		if took >= 15*time.Second {
			t.Errorf("%s on a paused server took %v with a 500ms context: it waited for the server, which answers nothing while paused", call, took)
		}
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
	backendtest.LostAnswers(t, isolate(t, mustNew(t, server.DSNFor(p.Addr())), uniquePrefix(t)), p)
}

// TestUnreachableFailsFast: a store over a port nobody listens on reports
// "cannot reach mysql at <host:port>: connection refused" at once, from
// Ping and from each of its calls, after one connection attempt.
func TestUnreachableFailsFast(t *testing.T) {
	dead := backendtest.ClosedPort(t)
	st := mustNew(t, server.DSNFor(dead))
	pctx, pcancel := context.WithTimeout(t.Context(), time.Minute)
	defer pcancel()
	start := time.Now()
	err := st.Ping(pctx)
	want := "mysql: dial: cannot reach mysql at " + dead + ": connection refused"
	if !errors.Is(err, driver.ErrUnreachable) || err.Error() != want {
		t.Errorf("Ping = %v, want %q", err, want)
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
		Backend: "mysql", Name: "mysql", URL: addr,
		New: func(t *testing.T) (driver.Store, func() int) {
			cfg, err := gomysql.ParseDSN(server.DSNFor(addr))
			if err != nil {
				t.Fatal(err)
			}
			var dials atomic.Int32
			cfg.DialFunc = func(ctx context.Context, network, a string) (net.Conn, error) {
				dials.Add(1)
				return (&net.Dialer{}).DialContext(ctx, network, a)
			}
			conn, err := gomysql.NewConnector(cfg)
			if err != nil {
				t.Fatal(err)
			}
			db := sql.OpenDB(conn)
			t.Cleanup(func() { db.Close() })
			s, err := mysql.New(db, table, mysql.WithEndpoint(addr))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s, func() int { return int(dials.Load()) }
		},
	}
}
