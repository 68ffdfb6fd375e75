package redis

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/tlsdiag"
)

// DialCluster is Dial for a Redis Cluster: rawURL names its seed nodes as
// go-redis's ParseClusterURL takes them
// ("redis://[:password@]host:port?addr=host2:port&addr=host3:port",
// "rediss://…" for TLS, with WithTLSConfig's configuration), and the Store
// owns the ClusterClient it makes: Close closes it. DialCluster confirms
// the Cluster answers a PING, which first loads its slot map from a seed,
// with Dial's bounds: a refused seed fails within ConnectTimeout, a silent
// one when ctx ends (DefaultDialTimeout when ctx has no deadline). Both
// match ErrUnreachable; the *UnreachableError's Endpoints are the seeds
// (go-redis asks every seed before giving up), or the node whose dial
// failed when it is none of them (a node the Cluster announced, its
// cluster-announce-ip). A TLS mismatch is a *tlsdiag.Error. A server that
// is no Cluster answers the PING with "cluster support disabled". Errors
// show rawURL as Dial's do.
func DialCluster(ctx context.Context, rawURL string, opts ...Option) (*Store, error) {
	o, err := goredis.ParseClusterURL(rawURL)
	if err != nil {
		return nil, urlError(rawURL, err)
	}
	so := resolve(opts)
	var problems []error
	if so.tlsConfig != nil {
		if o.TLSConfig == nil {
			problems = append(problems, optionError("WithTLSConfig", "with a redis:// URL", "use rediss://host:port, which asks for TLS"))
		} else {
			cfg := so.tlsConfig.Clone()
			if cfg.ServerName == "" {
				// rediss:// made o.TLSConfig, naming the first seed's host.
				cfg.ServerName = o.TLSConfig.ServerName
			}
			o.TLSConfig = cfg
		}
		so.tlsConfig = nil
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = ConnectTimeout
	}
	o.ContextTimeoutEnabled = true
	var certs *tlsdiag.CertWatch
	if o.TLSConfig != nil {
		o.TLSConfig, certs = tlsdiag.WatchClientCert(o.TLSConfig)
	}
	c := goredis.NewClusterClient(o)
	s, err := newStore(c, so, problems)
	if err != nil {
		c.Close()
		return nil, err
	}
	s.owns = true
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDialTimeout)
		defer cancel()
	}
	start := time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		if te := certs.Refused("redis", strings.Join(o.Addrs, ", "), err); te != nil {
			return nil, opError("dial", "", te)
		}
		endpoints := o.Addrs
		if op, ok := errors.AsType[*net.OpError](err); ok && op.Op == "dial" && op.Addr != nil && !slices.Contains(o.Addrs, op.Addr.String()) {
			endpoints = []string{op.Addr.String()}
		}
		err = unreachable(endpoints[0], err, time.Since(start))
		if ue, ok := errors.AsType[*UnreachableError](err); ok {
			ue.Endpoints = endpoints
		}
		return nil, opError("dial", "", err)
	}
	return s, nil
}
