package redis_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// TestCluster runs, over a three-master Redis Cluster the test starts, the
// conformance suite, a 64-worker Breaker fleet on hosts spread over the
// three masters' slots (the suite lists across the masters).
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-master cluster")
	}
	c := redistest.MustStartCluster(t, 3)
	newCC := func() *goredis.ClusterClient {
		cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = cc.Close() })
		return cc
	}
	t.Run("conformance", func(t *testing.T) {
		conformance.Run(t, func(context.Context, *testing.T) (conformance.Harness, error) {
			cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
			d := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
			return &harness{t: t, client: cc, direct: d, prefixes: map[driver.Store]string{},
				what: fmt.Sprintf("redis cluster at %v", c.Addrs())}, nil
		}, lostOnStandalone...)
	})
	// Hosts on every master: the fleet runs across slots.
	cc := newCC()
	hosts := hostsOnMasters(t, cc, uniquePrefix(t))
	t.Run("breaker-fleet", func(t *testing.T) {
		runFleet(t, func() goredis.UniversalClient { return newCC() }, hosts...)
	})
}

// hostsOnMasters returns one host name per master of cc whose key, under
// prefix, lives on that master.
func hostsOnMasters(t *testing.T, cc *goredis.ClusterClient, prefix string) []string {
	t.Helper()
	shards, err := cc.ClusterShards(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, shard := range shards {
		if len(shard.Slots) == 0 {
			continue
		}
		sh := shard.Slots[0]
		for i := 0; ; i++ {
			h := fmt.Sprintf("h%d.example", i)
			slot, err := cc.ClusterKeySlot(t.Context(), prefix+h).Result()
			if err != nil {
				t.Fatal(err)
			}
			if slot >= sh.Start && slot <= sh.End && !slices.Contains(hosts, h) {
				hosts = append(hosts, h)
				break
			}
		}
	}
	if len(hosts) != 3 {
		t.Fatalf("hosts %v for %d slot ranges, want one per master", hosts, len(shards))
	}
	return hosts
}

// lostOnStandalone waives the lost-answer promises for a Cluster: its
// client dials every master, so one fault proxy cannot lose its answers,
// and the scripts that recognise a write's own id are the same on a
// standalone server, where TestConformance verifies them through the proxy.
var lostOnStandalone = func() []conformance.Option {
	const why = "a Cluster client dials every master, so no one fault proxy loses its answers; the same scripts are verified on a standalone server through the proxy (TestConformance)"
	return []conformance.Option{
		conformance.Waive("lost-answer-cas", why),
		conformance.Waive("lost-answer-delete", why),
		conformance.Waive("lost-answer-breaker", why),
	}
}()
