package redis_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// TestClusterModeError: Dial with WithClusterCheck refuses a node of a
// Redis Cluster and takes a standalone server; without the option it takes
// the node (the negative control: the option is what refuses it);
// DialCluster refuses a standalone server. Each refusal is a
// *ClusterModeError whose fix names Setting when it is set.
func TestClusterModeError(t *testing.T) {
	s, err := redis.Dial(t.Context(), srv.URL(), redis.WithClusterCheck())
	if err != nil {
		t.Fatalf("Dial with WithClusterCheck on a standalone server: %v", err)
	}
	_ = s.Close()

	_, err = redis.DialCluster(t.Context(), srv.URL())
	ce, ok := errors.AsType[*redis.ClusterModeError](err)
	if !ok || ce.Cluster || ce.Addr != srv.Addr() || !strings.Contains(ce.Error(), "cluster support disabled") || !strings.HasSuffix(ce.Error(), ": dial it with Dial") {
		t.Fatalf("DialCluster on a standalone server: %v, want a *ClusterModeError", err)
	}
	if ce.Setting = "--cluster"; !strings.HasSuffix(ce.Error(), "is not a Redis Cluster ("+ce.Err.Error()+"): drop --cluster") {
		t.Errorf("with Setting: %v", ce)
	}

	if testing.Short() {
		t.Skip("starts a three-master cluster")
	}
	node := "redis://" + redistest.MustStartCluster(t, 3).Addrs()[0]
	s, err = redis.Dial(t.Context(), node)
	if err != nil {
		t.Fatalf("Dial without WithClusterCheck on a Cluster node: %v", err)
	}
	_ = s.Close()
	_, err = redis.Dial(t.Context(), node, redis.WithClusterCheck())
	ce, ok = errors.AsType[*redis.ClusterModeError](err)
	if !ok || !ce.Cluster || "redis://"+ce.Addr != node || !strings.HasSuffix(ce.Error(), "which holds only its own slots' keys: dial it with DialCluster") {
		t.Fatalf("Dial with WithClusterCheck on a Cluster node: %v, want a *ClusterModeError", err)
	}
	if ce.Setting = "--cluster"; !strings.HasSuffix(ce.Error(), ": add --cluster") {
		t.Errorf("with Setting: %v", ce)
	}
}
