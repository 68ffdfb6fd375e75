package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/internal/conformcheck"
	"github.com/kvbreaker/kvbreaker/internal/wipetest"
)

// harness makes Stores over the shared server, each under a prefix of its
// own, all on one pool that talks to PostgreSQL through a fault proxy
// (conformance.AnswerDropper).
type harness struct {
	t     testing.TB
	proxy *faultproxy.Proxy
	pool  *pgxpool.Pool
	store *postgres.Store
	app   string // the pool's application_name
	run   string
	n     atomic.Int64

	mu       sync.Mutex
	prefixes map[driver.Store]string
}

var harnessRuns atomic.Int64

func newHarness(ctx context.Context, t *testing.T) (conformance.Harness, error) {
	p, err := faultproxy.Start(server.Addr())
	if err != nil {
		return nil, err
	}
	h, err := harnessVia(ctx, p, server.URLFor(p.Addr()))
	if err != nil {
		p.Close()
		return nil, err
	}
	h.t = t
	return h, nil
}

func harnessVia(ctx context.Context, p *faultproxy.Proxy, url string) (*harness, error) {
	run := harnessRuns.Add(1)
	// Its followers' backends are "conformance-N: kvbreaker follow …"
	// in pg_stat_activity, for BreakFeed.
	app := fmt.Sprintf("conformance-%d", run)
	pool, err := pgxpool.New(ctx, url+"&application_name="+app)
	if err != nil {
		return nil, err
	}
	st, err := postgres.New(pool, table)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &harness{proxy: p, pool: pool, store: st, app: app, run: fmt.Sprintf("conformance/%d/", run), prefixes: map[driver.Store]string{}}, nil
}

func (h *harness) MakeStore(ctx context.Context) (driver.Store, error) {
	prefix := fmt.Sprintf("%s%d/", h.run, h.n.Add(1))
	s, err := kvbreaker.Prefixed(h.store, prefix)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.prefixes[s] = prefix
	h.mu.Unlock()
	return s, nil
}

// ForeignShapes implements conformance.ForeignPlanter.
func (h *harness) ForeignShapes() []string {
	names := make([]string, len(foreignRows))
	for i, r := range foreignRows {
		names[i] = r.name
	}
	return names
}

// PlantForeign implements conformance.ForeignPlanter with raw SQL on the
// harness's pool.
func (h *harness) PlantForeign(ctx context.Context, s driver.Store, key, shape string) error {
	h.mu.Lock()
	prefix, ok := h.prefixes[s]
	h.mu.Unlock()
	if !ok {
		return fmt.Errorf("not a store of this harness: %T", s)
	}
	return plantForeign(ctx, h.pool, prefix+key, shape)
}

func (h *harness) Close() {
	h.store.Close()
	h.pool.Close()
	if h.proxy != nil {
		// The lost-answer cases prove nothing if it lost none.
		h.t.Logf("fault proxy: %+v", h.proxy.Stats())
		h.proxy.Close()
	}
}

func (h *harness) Describe() string {
	return "postgres at " + server.Addr() + " (through a fault proxy)"
}

// Lifetime implements conformance.LifetimeReporter: the row's expires_at
// minus the server's now() (the store's own driver.ExpiryReader under the
// case store's prefix), which is also when readers stop seeing it: rows
// are filtered by the same column on the same clock.
func (h *harness) Lifetime(ctx context.Context, s driver.Store, key string) (time.Duration, error) {
	h.mu.Lock()
	prefix, ok := h.prefixes[s]
	h.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("not a store of this harness: %T", s)
	}
	return h.store.Expiry(ctx, prefix+key)
}

// DropNextAnswer implements conformance.AnswerDropper: PostgreSQL applies
// the next statement through the proxy and its answer is lost.
func (h *harness) DropNextAnswer(ctx context.Context) error {
	if h.proxy == nil {
		return errors.New("no fault proxy")
	}
	return h.proxy.DropNextAnswer(ctx)
}

// BreakFeed ends the listening backend of each of the harness's followers
// with pg_terminate_backend, as an operator or a failover would: each must
// report Lost and resynchronise.
func (h *harness) BreakFeed(ctx context.Context) error {
	n, err := terminate(ctx, h.pool, h.app)
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New("no follower of this harness is listening")
	}
	return nil
}

func TestConformance(t *testing.T) {
	conformance.Run(t, newHarness)
}

// Wipes implements conformance.Wiper: an operator's SQL on a connection of
// the harness's pool, not the store's: every row deleted (each row's
// trigger notifies), or the table truncated (no row trigger fires). The
// suite wipes only while no other case runs, and no other test of the
// package runs beside TestConformance. A DELETE with the triggers off
// (session_replication_role = replica) is what no follower can see: the
// operator's contract in docs/backends.md.
func (h *harness) Wipes() []string { return []string{"DELETE FROM", "TRUNCATE"} }

func (h *harness) Wipe(ctx context.Context, _ driver.Store, how string) error {
	var stmt string
	switch how {
	case "DELETE FROM":
		stmt = "DELETE FROM " + h.store.Table()
	case "TRUNCATE":
		stmt = "TRUNCATE " + h.store.Table()
	default:
		return fmt.Errorf("wipe: no way %q", how)
	}
	_, err := h.pool.Exec(ctx, stmt)
	return err
}

// TestFollowWipeBlind: follow-wipe's negative control on the real server: the
// same harness, its feeds blind to what the DELETE and the TRUNCATE make
// them say, fails the case.
func TestFollowWipeBlind(t *testing.T) {
	h, err := newHarness(t.Context(), t)
	if err != nil {
		t.Fatal(err)
	}
	wipetest.CheckBlindFails(t, h.(*harness))
}

// TestConformanceUnreachable: a store whose server refuses connections fails
// the first case within seconds, naming the address, and skips the rest.
func TestConformanceUnreachable(t *testing.T) {
	dead := backendtest.ClosedPort(t)
	h, err := harnessVia(t.Context(), nil, server.URLFor(dead))
	if err != nil {
		t.Fatal(err)
	}
	h.t = t
	defer h.Close()
	start := time.Now()
	rep, err := conformcheck.Measure(t.Context(), h, conformcheck.WithReachTimeout(3*time.Second))
	took := time.Since(start)
	if !errors.Is(err, conformance.PromiseID("reachable")) || !strings.Contains(err.Error(), dead) {
		t.Fatalf("Measure over an unreachable postgres = %v, want the first case failing naming %s", err, dead)
	}
	if took > 15*time.Second {
		t.Errorf("took %v to report an unreachable store", took)
	}
	for _, r := range rep.Results[1:] {
		if r.Skipped == "" {
			t.Errorf("case %v ran against an unreachable store", r)
			break
		}
	}
	t.Logf("%v after %v", err, took.Round(time.Millisecond))
}
