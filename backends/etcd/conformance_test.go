package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/internal/conformcheck"
	"github.com/kvbreaker/kvbreaker/internal/wipetest"
	"github.com/kvbreaker/kvbreaker/skew"
)

// harness makes etcd Stores over the shared embedded server, each under a
// prefix of its own, all on one client that talks to etcd through a fault
// proxy (conformance.AnswerDropper). It reads a key's lease through a
// direct client (conformance.LifetimeReporter: etcd's LeaseTimeToLive), so
// the suite checks pooled leases at the 30 min 5 s a Breaker writes.
type harness struct {
	t      testing.TB
	proxy  *faultproxy.Proxy
	cli    *clientv3.Client // through the proxy
	direct *clientv3.Client
	run    string
	n      atomic.Int64
	// prefixes maps each store MakeStore made (kvbreaker.Prefixed over
	// an etcd Store) to its prefix, for Lifetime.
	prefixes sync.Map
}

var harnessRuns atomic.Int64

func newHarness(ctx context.Context, t *testing.T) (conformance.Harness, error) {
	p, err := faultproxy.Start(strings.TrimPrefix(endpoints[0], "http://"))
	if err != nil {
		return nil, err
	}
	h, err := harnessVia(p, "http://"+p.Addr())
	if err != nil {
		p.Close()
		return nil, err
	}
	h.t = t
	return h, nil
}

// harnessVia makes a harness whose stores dial endpoint (through p, if not
// nil).
func harnessVia(p *faultproxy.Proxy, endpoint string) (*harness, error) {
	cfg := clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, err
	}
	cfg.Endpoints = endpoints
	direct, err := clientv3.New(cfg)
	if err != nil {
		cli.Close()
		return nil, err
	}
	return &harness{proxy: p, cli: cli, direct: direct, run: fmt.Sprintf("conformance/%d/", harnessRuns.Add(1))}, nil
}

func (h *harness) MakeStore(ctx context.Context) (driver.Store, error) {
	st, err := etcd.New(h.cli)
	if err != nil {
		return nil, err
	}
	prefix := fmt.Sprintf("%s%d/", h.run, h.n.Add(1))
	s, err := kvbreaker.Prefixed(st, prefix)
	if err != nil {
		return nil, err
	}
	h.prefixes.Store(s, prefix)
	return s, nil
}

func (h *harness) Close() {
	h.cli.Close()
	h.direct.Close()
	if h.proxy != nil {
		// The lost-answer cases prove nothing if it lost none.
		h.t.Logf("fault proxy: %+v", h.proxy.Stats())
		h.proxy.Close()
	}
}

func (h *harness) Describe() string {
	return fmt.Sprintf("etcd at %s (client endpoint %s)", strings.Join(endpoints, ","), strings.Join(h.cli.Endpoints(), ","))
}

// DropNextAnswer implements conformance.AnswerDropper: etcd applies the
// next request through the proxy and its answer is lost.
func (h *harness) DropNextAnswer(ctx context.Context) error {
	if h.proxy == nil {
		return errors.New("no fault proxy")
	}
	return h.proxy.DropNextAnswer(ctx)
}

// BreakFeed cuts every connection through the fault proxy, the watch
// streams of the stores' Follow calls among them: each reports Lost and
// resynchronises.
func (h *harness) BreakFeed(ctx context.Context) error {
	if h.proxy == nil {
		return errors.New("no fault proxy")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	h.proxy.ResetAll()
	return nil
}

// Lifetime implements conformance.LifetimeReporter: the remaining TTL of
// the key's lease, in the whole seconds LeaseTimeToLive reports (rounded
// down, within the declared 1 s granularity).
func (h *harness) Lifetime(ctx context.Context, s driver.Store, key string) (time.Duration, error) {
	prefix, ok := h.prefixes.Load(s)
	if !ok {
		return 0, fmt.Errorf("not a store of this harness: %T", s)
	}
	resp, err := h.direct.Get(ctx, prefix.(string)+key)
	if err != nil {
		return 0, err
	}
	if len(resp.Kvs) == 0 {
		return 0, driver.ErrNotFound
	}
	lease := clientv3.LeaseID(resp.Kvs[0].Lease)
	if lease == clientv3.NoLease {
		return 0, fmt.Errorf("%q has no lease: it never expires", key)
	}
	ttl, err := h.direct.TimeToLive(ctx, lease)
	if err != nil {
		return 0, err
	}
	if ttl.TTL < 0 {
		return 0, fmt.Errorf("%q: lease %x: %w", key, lease, driver.ErrNotFound)
	}
	return time.Duration(ttl.TTL) * time.Second, nil
}

func TestConformance(t *testing.T) {
	conformance.Run(t, newHarness)
}

// Wipes implements conformance.Wiper: an operator, with etcd's own API on a
// connection of theirs, deletes the range of keys (etcdctl del --prefix) or
// revokes the leases the keys are attached to (etcdctl lease revoke), which
// deletes every key of each lease. Both stay within the keys of this
// harness's stores.
func (h *harness) Wipes() []string { return []string{"delete range", "leases revoked"} }

func (h *harness) Wipe(ctx context.Context, _ driver.Store, how string) error {
	switch how {
	case "delete range":
		_, err := h.direct.Delete(ctx, h.run, clientv3.WithPrefix())
		return err
	case "leases revoked":
		resp, err := h.direct.Get(ctx, h.run, clientv3.WithPrefix())
		if err != nil {
			return err
		}
		leases := map[clientv3.LeaseID]bool{}
		for _, kv := range resp.Kvs {
			if id := clientv3.LeaseID(kv.Lease); id != clientv3.NoLease {
				leases[id] = true
			}
		}
		if len(leases) == 0 {
			return fmt.Errorf("wipe: no key under %s has a lease", h.run)
		}
		for id := range leases {
			if _, err := h.direct.Revoke(ctx, id); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("wipe: no way %q", how)
}

// TestFollowWipeBlind: follow-wipe's negative control on the real server: the
// same harness, its feeds blind to the deletes the watch delivers, fails
// the case.
func TestFollowWipeBlind(t *testing.T) {
	h, err := newHarness(t.Context(), t)
	if err != nil {
		t.Fatal(err)
	}
	wipetest.CheckBlindFails(t, h.(*harness))
}

// TestConformanceUnreachable: a store whose server does not answer fails
// the first case within seconds, naming the address, and skips the rest,
// rather than let every case wait out its timeout (211 s in all).
func TestConformanceUnreachable(t *testing.T) {
	dead := backendtest.ClosedPort(t)
	h, err := harnessVia(nil, "http://"+dead)
	if err != nil {
		t.Fatal(err)
	}
	h.t = t
	defer h.Close()
	start := time.Now()
	rep, err := conformcheck.Measure(t.Context(), h, conformcheck.WithReachTimeout(3*time.Second))
	took := time.Since(start)
	if !errors.Is(err, conformance.PromiseID("reachable")) || !strings.Contains(err.Error(), dead) {
		t.Fatalf("Measure over an unreachable etcd = %v, want the first case failing naming %s", err, dead)
	}
	if took > 15*time.Second {
		t.Errorf("took %v to report an unreachable store", took)
	}
	ran := 0
	for _, r := range rep.Results[1:] {
		if r.Skipped == "" {
			ran++
		}
	}
	if ran > 0 {
		t.Errorf("%d cases ran against an unreachable store", ran)
	}
	t.Logf("%v after %v", err, took.Round(time.Millisecond))
}

// TestDefaultTraitsMatchSkewProfile: a Store with default options over a
// server granting the default minimum lease declares DefaultTraits, and
// skew's etcd profile, on which the margin experiments run, equals them;
// against the fixture (1 s minimum) only MinTTL differs.
func TestDefaultTraitsMatchSkewProfile(t *testing.T) {
	if got, want := etcd.DefaultTraits(), skew.Etcd.Traits; got != want {
		t.Errorf("etcd.DefaultTraits() = %+v, but skew.Etcd declares %+v: update the profile", got, want)
	}
	declared := newStore(t, etcd.WithMinTTL(etcd.DefaultServerMinTTL))
	if got, want := declared.Traits(), etcd.DefaultTraits(); got != want {
		t.Errorf("Traits() with default options = %+v, but DefaultTraits() = %+v: update DefaultTraits", got, want)
	}
	learnt := newStore(t)
	want := etcd.DefaultTraits()
	want.Expiry.MinTTL = time.Second // the fixture's 100 ms election timeout
	if got := learnt.Traits(); got != want {
		t.Errorf("Traits() over the fixture = %+v, want %+v", got, want)
	}
}

// foreignValues are the values PlantForeign puts with a raw clientv3 Put
// and no lease, as other software or a hand edit would.
var foreignValues = map[string]func() string{
	"garbage":        func() string { return "\xff\xfe not a record \x00" },
	"empty":          func() string { return "" },
	"unknown format": func() string { return "\x09\x01\x02\x03" },
	"newer format":   func() string { return "\x02\x00\x00" },
	"text":           func() string { return `{"state":"open"}` },
	"1 MB":           func() string { return strings.Repeat("x", 1<<20) },
}

// ForeignShapes implements conformance.ForeignPlanter.
func (h *harness) ForeignShapes() []string { return slices.Sorted(maps.Keys(foreignValues)) }

// PlantForeign implements conformance.ForeignPlanter: a raw Put, without
// a lease, through the direct client.
func (h *harness) PlantForeign(ctx context.Context, s driver.Store, key, shape string) error {
	prefix, ok := h.prefixes.Load(s)
	if !ok {
		return fmt.Errorf("not a store of this harness: %T", s)
	}
	return plantForeign(ctx, h.direct, prefix.(string)+key, shape)
}

func plantForeign(ctx context.Context, cli *clientv3.Client, full, shape string) error {
	v, ok := foreignValues[shape]
	if !ok {
		return fmt.Errorf("no foreign shape %q", shape)
	}
	_, err := cli.Put(ctx, full, v())
	return err
}
