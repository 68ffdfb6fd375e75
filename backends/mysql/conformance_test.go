package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/mysql"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/internal/conformcheck"
)

// harness makes Stores over the shared server, each under a prefix of its
// own, all on one pool that talks to MariaDB through a fault proxy
// (conformance.AnswerDropper); foreign rows are planted on a second pool
// that dials the server directly.
type harness struct {
	t      testing.TB
	proxy  *faultproxy.Proxy
	db     *sql.DB
	direct *sql.DB
	store  *mysql.Store
	addr   string // where db connects
	run    string
	n      atomic.Int64

	mu       sync.Mutex
	prefixes map[driver.Store]string
}

var harnessRuns atomic.Int64

func newHarness(ctx context.Context, t *testing.T) (conformance.Harness, error) {
	p, err := faultproxy.Start(server.Addr())
	if err != nil {
		return nil, err
	}
	h, err := harnessVia(p, p.Addr())
	if err != nil {
		p.Close()
		return nil, err
	}
	h.t = t
	return h, nil
}

func harnessVia(p *faultproxy.Proxy, addr string) (*harness, error) {
	run := harnessRuns.Add(1)
	db, err := sql.Open("mysql", server.DSNFor(addr))
	if err != nil {
		return nil, err
	}
	direct, err := sql.Open("mysql", server.DSN())
	if err != nil {
		db.Close()
		return nil, err
	}
	st, err := mysql.New(db, table, mysql.WithEndpoint(addr))
	if err != nil {
		db.Close()
		direct.Close()
		return nil, err
	}
	return &harness{proxy: p, addr: addr, db: db, direct: direct, store: st, run: fmt.Sprintf("conformance/%d/", run), prefixes: map[driver.Store]string{}}, nil
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

func (h *harness) prefixOf(s driver.Store) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	prefix, ok := h.prefixes[s]
	if !ok {
		return "", fmt.Errorf("not a store of this harness: %T", s)
	}
	return prefix, nil
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
// direct pool.
func (h *harness) PlantForeign(ctx context.Context, s driver.Store, key, shape string) error {
	prefix, err := h.prefixOf(s)
	if err != nil {
		return err
	}
	return plantForeign(ctx, h.direct, prefix+key, shape)
}

func (h *harness) Close() {
	h.store.Close()
	h.db.Close()
	h.direct.Close()
	if h.proxy != nil {
		// The lost-answer cases prove nothing if it lost none.
		h.t.Logf("fault proxy: %+v", h.proxy.Stats())
		h.proxy.Close()
	}
}

func (h *harness) Describe() string {
	if h.proxy == nil {
		return "mysql (MariaDB " + server.Version() + ") at " + h.addr
	}
	return "mysql (MariaDB " + server.Version() + ") at " + server.Addr() + " (through a fault proxy)"
}

// Lifetime implements conformance.LifetimeReporter: the row's expires_at
// minus the server's UTC_TIMESTAMP(6) (the store's own
// driver.ExpiryReader under the case store's prefix), which is also when
// readers stop seeing it: rows are filtered by the same column on the same
// clock.
func (h *harness) Lifetime(ctx context.Context, s driver.Store, key string) (time.Duration, error) {
	prefix, err := h.prefixOf(s)
	if err != nil {
		return 0, err
	}
	return h.store.Expiry(ctx, prefix+key)
}

// DropNextAnswer implements conformance.AnswerDropper: MariaDB applies the
// next statement through the proxy and its answer is lost.
func (h *harness) DropNextAnswer(ctx context.Context) error {
	if h.proxy == nil {
		return errors.New("no fault proxy")
	}
	return h.proxy.DropNextAnswer(ctx)
}

func TestConformance(t *testing.T) {
	conformance.Run(t, newHarness)
}

// TestConformanceUnreachable: a store whose server refuses connections fails
// the first case within seconds, naming the address, and skips the rest.
func TestConformanceUnreachable(t *testing.T) {
	dead := backendtest.ClosedPort(t)
	h, err := harnessVia(nil, dead)
	if err != nil {
		t.Fatal(err)
	}
	h.t = t
	defer h.Close()
	start := time.Now()
	rep, err := conformcheck.Measure(t.Context(), h, conformcheck.WithReachTimeout(3*time.Second))
	took := time.Since(start)
	if !errors.Is(err, conformance.PromiseID("reachable")) || !strings.Contains(err.Error(), dead) {
		t.Fatalf("Measure over an unreachable mysql = %v, want the first case failing naming %s", err, dead)
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
