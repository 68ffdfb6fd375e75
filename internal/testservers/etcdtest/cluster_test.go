package etcdtest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/testservers/etcdtest"
)

// put writes key through the client endpoint ep (etcd's JSON gateway).
func put(ctx context.Context, ep, key, value string) error {
	var resp map[string]any
	return callURL(ctx, ep+"/v3/kv/put", map[string]string{"key": b64(key), "value": b64(value)}, &resp)
}

// eventually retries f every 50 ms (the cluster's timing, not logic) until
// it succeeds or d passes.
func eventually(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err = f(); err == nil {
			return
		}
	}
	t.Fatalf("%s: not within %v: %v", what, d, err)
}

// TestClusterPartitionAndKill: a partitioned leader is replaced by one the
// other two elect, writes through its client proxy fail while those
// through the others succeed, and after Heal it follows again; a killed
// leader is replaced and comes back by Restart.
func TestClusterPartitionAndKill(t *testing.T) {
	c := etcdtest.MustStartCluster(t, 3)
	ctx := t.Context()
	eps := c.Endpoints()
	l, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other := (l + 1) % 3
	c.Partition(l)
	eventually(t, 10*time.Second, "a new leader seen by the majority", func() error {
		nl, err := c.LeaderSeenBy(ctx, other)
		if err != nil {
			return err
		}
		if nl == l {
			return fmt.Errorf("member %d still follows the partitioned %d", other, l)
		}
		return nil
	})
	eventually(t, 10*time.Second, "a write through the majority", func() error {
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return put(wctx, eps[other], "k", "majority")
	})
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err = put(wctx, eps[l], "k", "cut-off")
	cancel()
	if err == nil {
		t.Fatalf("a write through the partitioned member %d's client proxy succeeded", l)
	}
	c.Heal()
	eventually(t, 10*time.Second, "the healed member follows the new leader", func() error {
		nl, err := c.LeaderSeenBy(ctx, l)
		if err != nil {
			return err
		}
		if nl == l {
			return fmt.Errorf("member %d still leads alone", l)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return put(wctx, eps[l], "k", "healed")
	})

	l, err = c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Members[l].Kill()
	other = (l + 1) % 3
	eventually(t, 10*time.Second, "a leader after the kill", func() error {
		nl, err := c.LeaderSeenBy(ctx, other)
		if err == nil && nl == l {
			return fmt.Errorf("the killed member %d is still leader", l)
		}
		return err
	})
	if err := c.Members[l].Restart(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the restarted member answers", func() error {
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return put(wctx, eps[l], "k", "restarted")
	})
}
