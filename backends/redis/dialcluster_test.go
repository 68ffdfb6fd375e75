package redis_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// clusterURL names seeds as go-redis's ParseClusterURL takes them.
func clusterURL(seeds []string) string {
	u := "redis://" + seeds[0]
	for i, s := range seeds[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + s
	}
	return u
}

// TestDialClusterUnreachable: seeds where nothing listens fail within
// ConnectTimeout (not the context's deadline) with an *driver.UnreachableError
// naming every seed; a standalone server is refused in its own words.
// Neither needs a Cluster, so they run in -short.
func TestDialClusterUnreachable(t *testing.T) {
	seeds := []string{backendtest.ClosedPort(t), backendtest.ClosedPort(t)}
	start := time.Now()
	_, err := redis.DialCluster(t.Context(), clusterURL(seeds))
	ue, ok := errors.AsType[*driver.UnreachableError](err)
	if !ok || !errors.Is(err, driver.ErrUnreachable) || !slices.Equal(ue.Endpoints, seeds) {
		t.Fatalf("DialCluster on closed ports: %v, want an *driver.UnreachableError naming %v", err, seeds)
	}
	if waited := time.Since(start); waited > adapter.DefaultDialTimeout {
		t.Errorf("DialCluster on closed ports took %v, beyond adapter.DefaultDialTimeout %v", waited, adapter.DefaultDialTimeout)
	}
	_, err = redis.DialCluster(t.Context(), srv.URL())
	if err == nil || !strings.Contains(err.Error(), "cluster support disabled") || errors.Is(err, driver.ErrUnreachable) {
		t.Errorf("DialCluster on a standalone server: %v, want the server's \"cluster support disabled\"", err)
	}
}

// TestDialClusterSilent: a seed that accepts connections and never
// answers fails DialCluster when ctx ends, with an error that matches
// ctx's as Dial's does (go-redis's ClusterClient reports its own i/o
// timeout), and driver.ErrUnreachable, naming the seed.
func TestDialClusterSilent(t *testing.T) {
	addr, _ := backendtest.SilentListener(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err := redis.DialCluster(ctx, "redis://"+addr)
	ue, ok := errors.AsType[*driver.UnreachableError](err)
	if !ok || !slices.Equal(ue.Endpoints, []string{addr}) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(ue.Reason, "did not answer") {
		t.Errorf("DialCluster on a silent seed: %v, want an *driver.UnreachableError naming it that matches context.DeadlineExceeded", err)
	}
}

// TestDialClusterOwnsItsClient: a Store DialCluster made works across the
// Cluster's masters and closes its ClusterClient on Close.
func TestDialClusterOwnsItsClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-master cluster")
	}
	c := redistest.MustStartCluster(t, 3)
	s, err := redis.DialCluster(t.Context(), clusterURL(c.Addrs()))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Client().(*goredis.ClusterClient); !ok {
		t.Fatalf("DialCluster's client is a %T", s.Client())
	}
	if got, want := s.String(), "redis cluster via "+strings.Join(c.Addrs(), ", "); got != want {
		t.Errorf("DialCluster's Store is %q, want %q", got, want)
	}
	for _, key := range []string{uniquePrefix(t) + "a.example", uniquePrefix(t) + "b.example", uniquePrefix(t) + "c.example"} {
		if _, err := s.CompareAndSwap(t.Context(), key, driver.NoVersion, []byte("x"), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Client().Ping(t.Context()).Err(); !errors.Is(err, goredis.ErrClosed) {
		t.Errorf("Ping after Close: %v, want the client closed", err)
	}
}

// TestDialClusterAnnouncedNode: when the Cluster announces its nodes at
// addresses where nothing listens (cluster-announce-port), the seed
// answers and the PING's node is refused: the error names that node and
// says the Cluster announced it, not a seed.
func TestDialClusterAnnouncedNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-master cluster")
	}
	c := redistest.MustStartCluster(t, 3)
	var announced []string
	for _, n := range c.Nodes {
		addr := backendtest.ClosedPort(t)
		_, port, _ := net.SplitHostPort(addr)
		if err := newClient(t, n.Addr()).ConfigSet(t.Context(), "cluster-announce-port", port).Err(); err != nil {
			t.Fatal(err)
		}
		announced = append(announced, addr)
	}
	seed := c.Nodes[0].Addr()
	// The other nodes' ports reach the seed by the cluster bus's gossip.
	deadline := time.Now().Add(30 * time.Second)
	for {
		shards, err := newClient(t, seed).ClusterShards(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		all := len(shards) == len(announced)
		for _, sh := range shards {
			for _, n := range sh.Nodes {
				all = all && slices.Contains(announced, net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10)))
			}
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the seed's CLUSTER SHARDS never showed the announced ports %v: %+v", announced, shards)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err := redis.DialCluster(t.Context(), "redis://"+seed)
	ue, ok := errors.AsType[*driver.UnreachableError](err)
	if !ok || len(ue.Endpoints) != 1 || !slices.Contains(announced, ue.Endpoints[0]) || !strings.Contains(ue.Reason, "a node the Cluster announced, none of the seeds") {
		t.Fatalf("DialCluster with nodes announced where nothing listens: %v, want an *driver.UnreachableError naming one of %v as announced", err, announced)
	}
	// Negative control: a refused seed is a seed, not a node announced.
	_, err = redis.DialCluster(t.Context(), "redis://"+announced[0])
	if ue, ok := errors.AsType[*driver.UnreachableError](err); !ok || strings.Contains(ue.Reason, "announced") {
		t.Errorf("DialCluster on a refused seed: %v", err)
	}
}
