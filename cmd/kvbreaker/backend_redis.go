package main

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"
	goredislog "github.com/redis/go-redis/v9/logging"

	"github.com/kvbreaker/kvbreaker/backends/redis"
)

var redisBackend = backendDesc{
	name:  "redis",
	title: "Redis",
	about: "(Redis, or a Redis Cluster)",
	flags: append(tlsFileFlags("redis", connFlag{name: "redis-url", env: "KVBREAKER_REDIS_URL", usage: "redis: server `URL`, redis://[:password@]host:port/db (rediss:// for TLS); with --redis-cluster, redis://[:password@]host:port?addr=host2:port&addr=host3:port", secret: true,
		need: true, check: checkRedisURL}, "rediss://", "redis://", "the server's certificate, for a rediss:// URL (default: the system's)"),
		connFlag{name: "redis-cluster", env: "KVBREAKER_REDIS_CLUSTER", usage: "redis: --redis-url names the seed nodes of a Redis Cluster (go-redis ParseClusterURL); list visits every master", boolean: true}),
	usage: `--redis-url redis://127.0.0.1:6379/0
or --redis-url rediss://user:password@redis:6380/0 --redis-cacert ca.pem
[--redis-cert client.pem --redis-key client-key.pem]
or --redis-cluster --redis-url redis://10.0.0.1:6379?addr=10.0.0.2:6379`,
	open:    openRedis,
	wipes:   "SWAPDB (a Cluster has none) is seen through a key per follower (kvbreaker:follow:<id>, kept an hour past its last check); under an ACL that refuses that key it is not: restart the fleet's processes after one",
	example: "--redis-url redis://127.0.0.1:6379/0",
}

// cluster reports --redis-cluster.
func (f *backendFlags) cluster() bool { return f.get("redis-cluster") != "" }

// clusterSetting names --redis-cluster for a fix: as given, or how to
// give it.
func clusterSetting(f *backendFlags) string {
	if f.cluster() {
		return f.name("redis-cluster")
	}
	return "--redis-cluster (or $" + f.env("redis-cluster") + "=true)"
}

// checkRedisURL checks --redis-url (and --redis-cluster) without
// connecting (redis.CheckURL), showing it by redactURL: go-redis's
// failover URLs take password=, and a mistyped URL may carry one.
func checkRedisURL(f *backendFlags, flag, raw string) error {
	check := func(raw string) error { return redis.CheckURL(raw, f.cluster(), clusterSetting(f)) }
	return checkWith(check, redactURL)(f, flag, raw)
}

// openRedis dials the server (redis.Dial, which refuses a node of a
// Cluster: WithClusterCheck), or the Cluster's seeds with --redis-cluster
// (redis.DialCluster), which confirm it answers a PING: a refused port is
// reported within 2 s (redis.Dial's connection timeout), a silent server
// when ctx (--timeout) ends.
func openRedis(ctx context.Context, f *backendFlags) (*conn, error) {
	// go-redis's own log lines (a pool's "failed to dial after 5 attempts",
	// several per refused port) would repeat the failure the command
	// reports once, in its own words, on stderr.
	goredislog.Disable()
	tlsConfig, err := loadTLS(f)
	if err != nil {
		return nil, err
	}
	dial := redis.Dial
	if f.cluster() {
		dial = redis.DialCluster
	}
	s, err := dial(ctx, f.get("redis-url"), redis.WithTLSConfig(tlsConfig), redis.WithClusterCheck())
	if ce, ok := errors.AsType[*redis.ClusterModeError](err); ok {
		ce.Setting = clusterSetting(f)
	} else if err != nil {
		if err = redis.Explain(err, "", f.name("redis-url")); goredis.HasErrorPrefix(err, "NOAUTH") {
			err = fmt.Errorf("%w (best through $%s, not the command line: ps shows flags)", err, f.env("redis-url"))
		}
	}
	return opened(s, err)
}
