package redis

import (
	"context"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/adapter"
)

// WithClusterCheck makes Dial refuse a node of a Redis Cluster with a
// *ClusterModeError: such a node holds only its own slots' keys, so a
// Store on it would miss the others' hosts and be answered MOVED for their
// keys. Dial then asks the server INFO cluster after its PING. DialCluster
// always refuses a server that is no Cluster, and ignores the option.
func WithClusterCheck() Option { return func(o *options) { o.clusterCheck = true } }

// A ClusterModeError is Dial's error (WithClusterCheck) when the server is
// a node of a Redis Cluster, and DialCluster's when the server answers
// that it is no Cluster ("cluster support disabled").
type ClusterModeError struct {
	// Addr is the server's address, or the seeds' (DialCluster).
	Addr string
	// Cluster: the server is a node of a Cluster (Dial's error).
	Cluster bool
	// Setting names the setting that asks for a Cluster, for the fix
	// ("add --cluster", "drop --cluster"); "" says DialCluster or Dial.
	Setting string
	// Err is DialCluster's refused PING; nil for Dial.
	Err error
}

func (e *ClusterModeError) Error() string {
	if e.Cluster {
		fix := "dial it with DialCluster"
		if e.Setting != "" {
			fix = "add " + e.Setting
		}
		return fmt.Sprintf("redis at %s is a node of a Redis Cluster, which holds only its own slots' keys: %s", e.Addr, fix)
	}
	fix := "dial it with Dial"
	if e.Setting != "" {
		fix = "drop " + e.Setting
	}
	return fmt.Sprintf("redis at %s is not a Redis Cluster (%v): %s", e.Addr, e.Err, fix)
}

// Unwrap returns DialCluster's refused PING.
func (e *ClusterModeError) Unwrap() error { return e.Err }

// checkClusterMode is WithClusterCheck's question to the server Dial
// reached at addr.
func checkClusterMode(ctx context.Context, c goredis.UniversalClient, addr string) error {
	ctx, cancel := adapter.DialContext(ctx, adapter.DefaultDialTimeout)
	defer cancel()
	start := time.Now()
	info, err := c.Info(ctx, "cluster").Result()
	if err != nil {
		return opError("dial", "", fmt.Errorf("INFO cluster: %w", unreachable(ctx, deployment(c), addr, err, time.Since(start))))
	}
	if strings.Contains(info, "cluster_enabled:1") {
		return &ClusterModeError{Addr: addr, Cluster: true}
	}
	return nil
}
