package redistest

import (
	"net"
	"testing"
	"time"
)

// TestStartKillRestart: the server listens, Kill ends it (the port
// refuses), Restart brings it back on the same port.
func TestStartKillRestart(t *testing.T) {
	s := MustStart(t)
	dial := func() error {
		c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(); err != nil {
		t.Fatalf("started server on %s: %v", s.Addr(), err)
	}
	pid := s.PID()
	s.Kill()
	if err := dial(); err == nil {
		t.Fatalf("killed server (pid %d) still accepts on %s", pid, s.Addr())
	}
	if err := s.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := dial(); err != nil || s.PID() == pid {
		t.Fatalf("restarted server: %v, pid %d (was %d)", err, s.PID(), pid)
	}
}

func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers")
	}
	c := MustStartCluster(t, 3)
	if len(c.Addrs()) != 3 {
		t.Fatalf("addrs %v", c.Addrs())
	}
}

// TestReplicatedFailover: the Sentinels name the first server as primary;
// once it is killed they promote the replica; the old primary restarted as
// a replica of the new one syncs from it.
func TestReplicatedFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two servers and three sentinels and waits for a failover")
	}
	r := MustStartReplicated(t, ReplicatedOptions{})
	ctx := t.Context()
	p, err := r.Primary(ctx)
	if err != nil || p != r.Servers[0] {
		t.Fatalf("primary %v, %v; want the first server", p, err)
	}
	if _, err := cli(ctx, p.Addr(), "set", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli(ctx, p.Addr(), "wait", "1", "2000"); err != nil {
		t.Fatal(err)
	}
	p.Kill()
	np, err := r.WaitFailover(ctx, p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if np != r.Servers[1] {
		t.Fatalf("new primary %s, want the replica %s", np.Addr(), r.Servers[1].Addr())
	}
	if v, err := cli(ctx, np.Addr(), "get", "k"); v != "v" || err != nil {
		t.Errorf("new primary's k = %q, %v; want the replicated v", v, err)
	}
	if err := p.RestartAsReplica(ctx, np.Addr()); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitSynced(ctx, np); err != nil {
		t.Fatal(err)
	}
	if v, err := cli(ctx, p.Addr(), "get", "k"); v != "v" || err != nil {
		t.Errorf("old primary, now a replica: k = %q, %v; want v", v, err)
	}
}

// TestClusterWithReplicas: three masters with a replica each; a replica
// given CLUSTER FAILOVER becomes a master and the cluster stays ok.
func TestClusterWithReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six servers")
	}
	c := MustStartClusterWithReplicas(t, 3, 1)
	ctx := t.Context()
	var replica *Server
	for _, s := range c.Nodes {
		if info, _ := s.Info(ctx, "replication"); infoField(info, "role") == "slave" {
			replica = s
			break
		}
	}
	if replica == nil {
		t.Fatal("no replica")
	}
	if out, err := cli(ctx, replica.Addr(), "cluster", "failover"); err != nil || out != "OK" {
		t.Fatalf("cluster failover: %q, %v", out, err)
	}
	if err := poll(ctx, 20*time.Second, func() bool {
		info, _ := replica.Info(ctx, "replication")
		return infoField(info, "role") == "master"
	}); err != nil {
		t.Fatalf("%s not a master after CLUSTER FAILOVER: %v", replica.Addr(), err)
	}
	if err := c.WaitReplicasUp(ctx, 3); err != nil {
		t.Fatal(err)
	}
}
