package nats_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kvbreaker/kvbreaker"
	kvnats "github.com/kvbreaker/kvbreaker/backends/nats"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/skew"
)

// harness makes Stores over the shared server, each under a prefix of its
// own, all on one connection that goes through a fault proxy
// (conformance.AnswerDropper, conformance.FeedBreaker). It reads keys
// with a second Store on a direct connection (Lifetime, PlantForeign).
type harness struct {
	t      testing.TB
	proxy  *faultproxy.Proxy
	nc     *natsgo.Conn // through the proxy
	direct *kvnats.Store
	run    string
	n      atomic.Int64
}

var harnessRuns atomic.Int64

func newHarness(ctx context.Context, t *testing.T) (conformance.Harness, error) {
	p, err := faultproxy.Start(server.Addr())
	if err != nil {
		return nil, err
	}
	nc, err := natsgo.Connect("nats://"+p.Addr(), natsgo.MaxReconnects(-1), natsgo.ReconnectWait(50*time.Millisecond), natsgo.ReconnectBufSize(-1), quiet)
	if err != nil {
		p.Close()
		return nil, err
	}
	direct, err := kvnats.Dial(ctx, server.URL(), bucket, nil)
	if err != nil {
		nc.Close()
		p.Close()
		return nil, err
	}
	return &harness{t: t, proxy: p, nc: nc, direct: direct, run: fmt.Sprintf("conformance/%d/", harnessRuns.Add(1))}, nil
}

func (h *harness) MakeStore(ctx context.Context) (driver.Store, error) {
	st, err := kvnats.New(ctx, h.nc, bucket)
	if err != nil {
		return nil, err
	}
	return kvbreaker.Prefixed(st, fmt.Sprintf("%s%d/", h.run, h.n.Add(1)))
}

func (h *harness) Close() {
	h.nc.Close()
	h.direct.Close()
	h.t.Logf("fault proxy: %+v", h.proxy.Stats())
	h.proxy.Close()
}

func (h *harness) Describe() string {
	return fmt.Sprintf("NATS at %s (through the fault proxy at %s), bucket %s", server.URL(), h.proxy.Addr(), bucket)
}

// DropNextAnswer implements conformance.AnswerDropper.
func (h *harness) DropNextAnswer(ctx context.Context) error { return h.proxy.DropNextAnswer(ctx) }

// BreakFeed implements conformance.FeedBreaker: every connection through
// the proxy is reset, the one the stores' Follow calls use among them.
func (h *harness) BreakFeed(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h.proxy.ResetAll()
	return nil
}

// Lifetime implements conformance.LifetimeReporter: the key's TTL less its
// message's age, read on the direct connection.
func (h *harness) Lifetime(ctx context.Context, s driver.Store, key string) (time.Duration, error) {
	_, prefix, ok := kvbreaker.Unprefixed(s)
	if !ok {
		return 0, fmt.Errorf("not a store of this harness: %T", s)
	}
	return h.direct.Expiry(ctx, kvbreaker.PrefixedKey(prefix, key))
}

// foreignValues are what PlantForeign puts with a plain JetStream publish
// and no TTL, as other software (nats kv put) would.
var foreignValues = map[string]func() []byte{
	"garbage":        func() []byte { return []byte("\xff\xfe not a record \x00") },
	"empty":          func() []byte { return nil },
	"unknown format": func() []byte { return []byte("\x09\x01\x02\x03") },
	"newer format":   func() []byte { return []byte("\x02\x00\x00") },
	"text":           func() []byte { return []byte(`{"state":"open"}`) },
	"1 KB":           func() []byte { return []byte(strings.Repeat("x", 1<<10)) },
}

// ForeignShapes implements conformance.ForeignPlanter.
func (h *harness) ForeignShapes() []string { return slices.Sorted(maps.Keys(foreignValues)) }

// PlantForeign implements conformance.ForeignPlanter: a publish without a
// TTL or an expected sequence on the direct connection.
func (h *harness) PlantForeign(ctx context.Context, s driver.Store, key, shape string) error {
	_, prefix, ok := kvbreaker.Unprefixed(s)
	if !ok {
		return fmt.Errorf("not a store of this harness: %T", s)
	}
	v, ok := foreignValues[shape]
	if !ok {
		return fmt.Errorf("no foreign shape %q", shape)
	}
	resp, err := h.direct.Conn().RequestWithContext(ctx, h.direct.Subject(kvbreaker.PrefixedKey(prefix, key)), v())
	if err != nil {
		return err
	}
	if strings.Contains(string(resp.Data), `"error"`) {
		return errors.New(string(resp.Data))
	}
	return nil
}

func TestConformance(t *testing.T) {
	conformance.Run(t, newHarness)
}

// Wipes implements conformance.Wiper: an operator, with JetStream's own API
// on a connection of theirs, purges the bucket's stream, or deletes the
// bucket and creates it again with the same configuration (the suite wipes
// only while no other case runs, and no other test of the package runs
// beside TestConformance).
func (h *harness) Wipes() []string { return []string{"stream purged", "bucket created again"} }

func (h *harness) Wipe(ctx context.Context, _ driver.Store, how string) error {
	js, err := jetstream.New(h.direct.Conn())
	if err != nil {
		return err
	}
	st, err := js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		return err
	}
	switch how {
	case "stream purged":
		return st.Purge(ctx)
	case "bucket created again":
		cfg := st.CachedInfo().Config
		if err := js.DeleteKeyValue(ctx, bucket); err != nil {
			return err
		}
		_, err = js.CreateStream(ctx, cfg)
		return err
	}
	return fmt.Errorf("wipe: no way %q", how)
}

// TestDefaultTraitsMatchSkewProfile: a Store declares DefaultTraits, and
// skew's NATS profile, on which the margin experiments run, equals them.
func TestDefaultTraitsMatchSkewProfile(t *testing.T) {
	if got, want := kvnats.DefaultTraits(), skew.NATS.Traits; got != want {
		t.Errorf("nats.DefaultTraits() = %+v, but skew.NATS declares %+v: update the profile", got, want)
	}
	if got, want := newStore(t).Traits(), kvnats.DefaultTraits(); got != want {
		t.Errorf("Traits() = %+v, but DefaultTraits() = %+v", got, want)
	}
}
