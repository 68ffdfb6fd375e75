package etcd_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/core"
	"github.com/kvbreaker/kvbreaker/skew"
)

// harness makes etcd Stores over the shared embedded server, each under a
// prefix of its own, all on one client.
type harness struct {
	cli *clientv3.Client
	run string
	n   atomic.Int64
}

var harnessRuns atomic.Int64

func newHarness(ctx context.Context, t *testing.T) (conformance.Harness, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	return &harness{cli: cli, run: fmt.Sprintf("conformance/%d/", harnessRuns.Add(1))}, nil
}

func (h *harness) MakeStore(ctx context.Context) (core.Store, error) {
	return etcd.New(h.cli, etcd.WithPrefix(fmt.Sprintf("%s%d/", h.run, h.n.Add(1))))
}

func (h *harness) Close() { h.cli.Close() }

func TestConformance(t *testing.T) {
	conformance.Run(t, newHarness)
}

// TestTraitsMatchSkewProfile: with the default server minimum (2 s) the
// Store declares exactly skew's etcd profile, which the margin experiments
// run on; against the fixture (1 s minimum) only MinTTL differs.
func TestTraitsMatchSkewProfile(t *testing.T) {
	declared := newStore(t, etcd.WithMinTTL(2*time.Second))
	if got, want := declared.Traits(), skew.Etcd.Traits; got != want {
		t.Errorf("Traits() = %+v, but skew.Etcd declares %+v: update one of them", got, want)
	}
	learnt := newStore(t)
	want := skew.Etcd.Traits
	want.Expiry.MinTTL = time.Second // the fixture's 100 ms election timeout
	if got := learnt.Traits(); got != want {
		t.Errorf("Traits() over the fixture = %+v, want %+v", got, want)
	}
}
