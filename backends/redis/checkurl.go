package redis

import (
	"errors"
	"fmt"
	"net/url"

	goredis "github.com/redis/go-redis/v9"
)

// CheckURL checks rawURL without connecting: for Dial (go-redis's ParseURL,
// redis://host:port/db or rediss://…) or, with cluster, for DialCluster
// (ParseClusterURL: seeds as addr= parameters). It also refuses what
// parses but would not do what the URL says: a Sentinel master
// (master_name=, which neither dials), a Cluster URL with a database other
// than 0 (ParseClusterURL ignores the path: the store would use 0) or
// with replica reads (read_only, route_by_latency, route_randomly), and
// seeds given to Dial. clusterSetting names how the caller's user turns
// cluster on ("--redis-cluster"), for the messages, which never quote the
// URL (url.Parse's errors would, password included).
func CheckURL(rawURL string, cluster bool, clusterSetting string) error {
	u, perr := url.Parse(rawURL)
	// go-redis has ParseFailoverURL, but there is no Sentinel test server
	// here to prove a store against: refuse it in words.
	if perr == nil && u.Query().Has("master_name") {
		return fmt.Errorf("master_name= names a Redis Sentinel master, which kvbreaker does not support: point the URL at the current master (redis://host:port/db), or at a Cluster with %s", clusterSetting)
	}
	if cluster {
		o, err := goredis.ParseClusterURL(rawURL)
		if err != nil {
			return fmt.Errorf("with %s want redis://host:port?addr=host2:port&addr=host3:port or rediss://… (%w)", clusterSetting, urlReason(err))
		}
		if u.Path != "" && u.Path != "/" && u.Path != "/0" {
			return fmt.Errorf("a Redis Cluster has database 0 only: drop %q (with %s)", u.Path, clusterSetting)
		}
		// Replica reads would need WithReplicaReads and a lag bound only
		// the caller knows.
		if o.ReadOnly || o.RouteByLatency || o.RouteRandomly {
			return errors.New("read_only, route_by_latency and route_randomly send reads to replicas; the store reads from masters: drop them")
		}
		return nil
	}
	if _, err := goredis.ParseURL(rawURL); err != nil {
		if perr == nil && u.Query().Has("addr") {
			return fmt.Errorf("addr= names the seeds of a Redis Cluster: add %s", clusterSetting)
		}
		return fmt.Errorf("want redis://host:port/db or rediss://host:port/db (%w)", urlReason(err))
	}
	return nil
}

// urlReason drops the URL that url.Parse's errors quote whole, password
// included.
func urlReason(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}
