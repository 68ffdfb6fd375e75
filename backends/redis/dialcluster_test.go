package redis_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

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
	if waited := time.Since(start); waited > redis.DefaultDialTimeout {
		t.Errorf("DialCluster on closed ports took %v, beyond DefaultDialTimeout %v", waited, redis.DefaultDialTimeout)
	}
	_, err = redis.DialCluster(t.Context(), srv.URL())
	if err == nil || !strings.Contains(err.Error(), "cluster support disabled") || errors.Is(err, driver.ErrUnreachable) {
		t.Errorf("DialCluster on a standalone server: %v, want the server's \"cluster support disabled\"", err)
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
