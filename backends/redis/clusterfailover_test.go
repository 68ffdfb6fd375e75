package redis_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// TestClusterFailover runs four workers, each with its own ClusterClient,
// recording failures on hosts spread over the three masters of a Cluster
// with a replica each, through a CLUSTER FAILOVER (the replica takes over
// once it has caught up: nothing acknowledged is lost) and a master killed
// (its replica takes over after the node timeout; what the master had not
// yet replicated is lost, measured). It checks every call ends within
// CallTimeout plus slack and every worker is served again within a bound,
// and that WithWaitReplicas on a Cluster waits on the key's master and
// reports a write no replica acknowledged.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node cluster and fails over twice")
	}
	c := redistest.MustStartClusterWithReplicas(t, 3, 1)
	ctx := t.Context()
	newCC := func() *goredis.ClusterClient {
		cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true,
			DialTimeout: 300 * time.Millisecond, MinRetryBackoff: time.Millisecond, MaxRetryBackoff: 20 * time.Millisecond})
		t.Cleanup(func() { _ = cc.Close() })
		return cc
	}
	admin := newCC()
	prefix := uniquePrefix(t)
	hosts := hostsOnMasters(t, admin, prefix+"c/")
	clk := newUniqueClock()
	h := &history{}
	var workers []*kvbreaker.Breaker
	for range 4 {
		st, err := redis.New(newCC())
		if err != nil {
			t.Fatal(err)
		}
		p, err := kvbreaker.Prefixed(st, prefix+"c/")
		if err != nil {
			t.Fatal(err)
		}
		b, err := kvbreaker.New(p, countSettings(clk))
		if err != nil {
			t.Fatal(err)
		}
		workers = append(workers, b)
	}
	stored := func(t *testing.T) int {
		st, _ := redis.New(admin)
		p, _ := kvbreaker.Prefixed(st, prefix+"c/")
		b, err := kvbreaker.New(p, countSettings(clk))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, host := range hosts {
			var s kvbreaker.Status
			for until := time.Now().Add(10 * time.Second); ; {
				if s, err = b.Inspect(ctx, host); err == nil || time.Now().After(until) {
					break
				}
				admin.ReloadState(ctx)
				time.Sleep(50 * time.Millisecond) // waiting for the cluster
			}
			if err != nil {
				t.Fatalf("inspect %s: %v", host, err)
			}
			n += len(s.Failures)
		}
		return n
	}

	// hostMaster is the master that serves hosts[0]'s slot, and its replica.
	slot, err := admin.ClusterKeySlot(ctx, prefix+"c/"+hosts[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	roles := func(t *testing.T) (master, replica string) {
		for until := time.Now().Add(20 * time.Second); time.Now().Before(until); time.Sleep(50 * time.Millisecond) { // waiting for the cluster
			// Ask a node that is running: the killed master's view is gone.
			for _, n := range c.Nodes {
				if !n.Running() {
					continue
				}
				master, replica = slotRoles(ctx, newClient(t, n.Addr()), slot)
				if master != "" {
					return master, replica
				}
			}
		}
		t.Fatalf("no master serves slot %d", slot)
		return "", ""
	}

	run := func(t *testing.T, name string, fault func(master, replica string), newMaster func(old string) bool) {
		h.mu.Lock()
		h.calls = nil
		h.mu.Unlock()
		before := stored(t)
		master, replica := roles(t)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for i, b := range workers {
			wg.Go(func() {
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					host := hosts[(i+n)%len(hosts)]
					cl := call{Worker: i, Op: "failure", Host: host, Start: time.Now()}
					cl.Err = b.Failure(ctx, host)
					cl.End = time.Now()
					h.add(cl)
				}
			})
		}
		waitCalls(t, h, 50)
		faultAt := time.Now()
		fault(master, replica)
		for until := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) { // waiting for the cluster
			if m, _ := roles(t); m != "" && newMaster(m) {
				break
			}
			if time.Now().After(until) {
				t.Fatalf("%s: no new master for slot %d after 30 s", name, slot)
			}
		}
		switched := time.Now()
		recovered := waitEachWorkerOK(t, &failoverFleet{h: h, workers: make([]*worker, len(workers))}, switched, 15*time.Second)
		close(stop)
		wg.Wait()
		calls := h.all()
		acked, errs := 0, 0
		for _, cl := range calls {
			if cl.Err == nil {
				acked++
			} else {
				errs++
			}
		}
		after := stored(t)
		for _, v := range checkCallTime(calls, callTimeout+callSlack) {
			t.Error(v)
		}
		survived := after - before
		t.Logf("%s: %d calls, %d errors, %d acked failures, %d survived (at least %d acknowledged lost); new master %v after the fault, every worker served %v after that",
			name, len(calls), errs, acked, survived, max(0, acked-survived), switched.Sub(faultAt).Round(100*time.Millisecond), recovered.Round(time.Millisecond))
		if survived > len(calls) {
			t.Errorf("%d failures stored, more than the %d Failure calls", survived, len(calls))
		}
		if name == "CLUSTER FAILOVER" && survived < acked {
			t.Errorf("CLUSTER FAILOVER lost %d acknowledged failures; it waits for the replica to catch up", acked-survived)
		}
	}

	var oldMaster string
	t.Run("cluster-failover", func(t *testing.T) {
		run(t, "CLUSTER FAILOVER", func(master, replica string) {
			oldMaster = master
			if err := newClient(t, replica).Do(ctx, "cluster", "failover").Err(); err != nil {
				t.Fatal(err)
			}
		}, func(m string) bool { return m != oldMaster })
		// The old master is the replica now; wait for its link.
		if err := c.WaitReplicasUp(ctx, 3); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("master-killed", func(t *testing.T) {
		var killed string
		run(t, "master killed", func(master, _ string) {
			killed = master
			c.Node(master).Kill()
		}, func(m string) bool { return m != killed })
	})
	t.Run("wait-replicas", func(t *testing.T) {
		// The killed master's slots are on a master without a replica now;
		// the other two still have one.
		st, err := redis.New(newCC(), redis.WithWaitReplicas(1, 100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		var notReplicated, ok int
		for _, host := range hostsOnMasters(t, admin, prefix+"w/") {
			_, err := st.CompareAndSwap(ctx, prefix+"w/"+host, driver.NoVersion, []byte("x"), time.Minute)
			_, typed := errors.AsType[*redis.NotReplicatedError](err)
			switch {
			case err == nil:
				ok++
			case typed && errors.Is(err, redis.ErrNotReplicated):
				notReplicated++
			default:
				t.Errorf("write on %s's master: %v", host, err)
			}
		}
		if ok != 2 || notReplicated != 1 {
			t.Errorf("writes on the three masters: %d acknowledged by a replica, %d not; want 2 and 1 (the killed master's successor has none)", ok, notReplicated)
		}
	})
}

// slotRoles reads CLUSTER NODES at c and returns the addresses of the
// master serving slot and of a replica of it, each not flagged failed.
func slotRoles(ctx context.Context, c *goredis.Client, slot int64) (master, replica string) {
	out, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return "", ""
	}
	var masterID string
	type node struct{ addr, flags, of string }
	var nodes []node
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		nodes = append(nodes, node{addr, f[2], f[3]})
		if strings.Contains(f[2], "fail") || !strings.Contains(f[2], "master") {
			continue
		}
		for _, r := range f[8:] {
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.ParseInt(lo, 10, 64)
			b, err2 := strconv.ParseInt(hi, 10, 64)
			if err1 == nil && err2 == nil && slot >= a && slot <= b {
				master, masterID = addr, f[0]
			}
		}
	}
	for _, n := range nodes {
		if n.of == masterID && strings.Contains(n.flags, "slave") && !strings.Contains(n.flags, "fail") {
			replica = n.addr
		}
	}
	return master, replica
}
