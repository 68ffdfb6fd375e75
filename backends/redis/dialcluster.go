package redis

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/driver"
)

// DialCluster is Dial for a Redis Cluster: rawURL names its seed nodes as
// go-redis's ParseClusterURL takes them
// ("redis://[:password@]host:port?addr=host2:port&addr=host3:port",
// "rediss://…" for TLS, with WithTLSConfig's configuration), and the Store
// owns the ClusterClient it makes: Close closes it. DialCluster confirms
// the Cluster answers a PING, which first loads its slot map from a seed,
// with Dial's bounds: a refused seed fails within 2 s, a silent one when
// ctx ends (adapter.DefaultDialTimeout when ctx has no deadline). Both match
// driver.ErrUnreachable; the *driver.UnreachableError's Endpoints are the
// seeds (go-redis asks every seed before giving up), or the node whose
// dial failed when it is none of them, and its Reason then says so (a node
// the Cluster announced, at its cluster-announce-ip and -port). A TLS
// mismatch is a *tlsdiag.Error. A server that is no Cluster answers the
// PING with "cluster support disabled": a *ClusterModeError. A server's
// refusal names the Cluster as Store.String does ("redis cluster via
// host:port, …"). Errors show rawURL as Dial's do.
func DialCluster(ctx context.Context, rawURL string, opts ...Option) (*Store, error) {
	o, err := goredis.ParseClusterURL(rawURL)
	if err != nil {
		return nil, urlError(rawURL, err)
	}
	return dial(ctx, opts, dialTarget{
		tls: &o.TLSConfig, dialTimeout: &o.DialTimeout, contextTimeout: &o.ContextTimeoutEnabled,
		tlsURL: "rediss://host:port", addrs: o.Addrs,
	}, func() goredis.UniversalClient { return goredis.NewClusterClient(o) },
		func(ctx context.Context, where string, err error, waited time.Duration) error {
			if strings.Contains(err.Error(), "cluster support disabled") {
				return &ClusterModeError{Addr: strings.Join(o.Addrs, ", "), Err: err}
			}
			endpoints, announced := o.Addrs, false
			if op, ok := errors.AsType[*net.OpError](err); ok && op.Op == "dial" && op.Addr != nil && !slices.Contains(o.Addrs, op.Addr.String()) {
				endpoints, announced = []string{op.Addr.String()}, true
			}
			err = unreachable(ctx, where, endpoints[0], err, waited)
			if ue, ok := errors.AsType[*driver.UnreachableError](err); ok {
				ue.Endpoints = endpoints
				if announced {
					// The seeds answered; the address is what the Cluster
					// says the node is at, which may not be where its
					// clients can reach it.
					ue.Reason += " (a node the Cluster announced, none of the seeds: see its cluster-announce-ip and cluster-announce-port)"
				}
			}
			return err
		})
}
