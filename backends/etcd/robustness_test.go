package etcd_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/robustness"
	"github.com/kvbreaker/kvbreaker/internal/testservers/etcdtest"
)

// etcdFaults are the faults the robustness run injects into a 3-member
// cluster, each healed when its time is up.
var etcdFaults = []string{"kill-leader", "kill-follower", "restart", "partition", "pause"}

// inject returns the Inject function of a robustness run on c.
func inject(c *etcdtest.Cluster) func(ctx context.Context, f robustness.Fault) (func(context.Context) error, error) {
	return func(ctx context.Context, f robustness.Fault) (func(context.Context) error, error) {
		n := len(c.Members)
		target := f.Target % n
		if f.Kind == "kill-leader" || f.Kind == "kill-follower" {
			l, err := c.Leader(ctx)
			if err != nil {
				return nil, err
			}
			target = l
			if f.Kind == "kill-follower" {
				target = (l + 1 + f.Target%(n-1)) % n
			}
		}
		m := c.Members[target]
		switch f.Kind {
		case "kill-leader", "kill-follower":
			m.Kill()
			return m.Restart, nil
		case "restart":
			m.Stop()
			return m.Restart, nil
		case "partition":
			c.Partition(target)
			return func(context.Context) error { c.Heal(); return nil }, nil
		case "pause":
			if err := m.Pause(); err != nil {
				return nil, err
			}
			return func(context.Context) error { return m.Resume() }, nil
		}
		return nil, fmt.Errorf("unknown fault %q", f.Kind)
	}
}

// TestRobustness runs Breakers over a 3-member etcd cluster while the
// leader or a follower is killed, a member restarted, partitioned or
// paused, on a schedule drawn from the seed, and checks the history
// (internal/robustness). The default schedule is short (15 s of faults);
// make robustness runs long ones: go test -run TestRobustness -args
// -seeds 10 -faultphase 2m. Replay a seed with -args -seed N.
func TestRobustness(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time fault schedule (-short)")
	}
	c := etcdtest.MustStartCluster(t, 3)
	for _, seed := range robustness.Seeds() {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("seed %d (replay: go test -run TestRobustness ./backends/etcd/ -args -seed %d -faultphase %v)", seed, seed, robustness.FaultPhase(15*time.Second))
			var mu sync.Mutex
			var clients []*clientv3.Client
			t.Cleanup(func() {
				for _, cli := range clients {
					cli.Close()
				}
			})
			rep, err := robustness.Run(t.Context(), robustness.Config{
				Store: "etcd",
				Seed:  seed,
				NewStore: func(ctx context.Context, worker int) (driver.Store, error) {
					cli, err := clientv3.New(clientv3.Config{
						Endpoints: c.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
						DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second,
					})
					if err != nil {
						return nil, err
					}
					mu.Lock()
					clients = append(clients, cli)
					mu.Unlock()
					return etcd.New(cli)
				},
				Faults:     etcdFaults,
				Inject:     inject(c),
				FaultPhase: robustness.FaultPhase(15 * time.Second),
				// A restarted member and the clients' reconnection take
				// seconds on a loaded 2-core machine.
				Settle: 5 * time.Second,
				Slack:  2 * time.Second,
				Settings: kvbreaker.Settings{
					FailureThreshold: 3, FailureWindow: 2 * time.Second, RecoveryDelay: time.Second,
					CallTimeout: time.Second, Logger: slog.New(slog.DiscardHandler),
				},
				Logf: t.Logf,
			})
			t.Log(rep)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Faults == 0 || rep.Decisions["probe"] == 0 {
				t.Fatalf("the run injected no fault or never probed: %v", rep)
			}
		})
	}
}
