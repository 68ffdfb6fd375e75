package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// DefaultDialTimeout bounds Dial when its context has no deadline.
const DefaultDialTimeout = 5 * time.Second

// Dial connects to the etcd cluster at endpoints ("https://host:2379"; user
// information in an endpoint is not sent nor shown in errors) with tlsConfig
// (nil for plain text) and returns a Store that owns the client: Close
// closes it. Dial fails if the cluster does not answer within ctx (or
// DefaultDialTimeout when ctx has no deadline); ctx does not bound the
// Store's later life.
func Dial(ctx context.Context, endpoints []string, tlsConfig *tls.Config, opts ...Option) (*Store, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("etcd: dial: no endpoints")
	}
	eps := make([]string, len(endpoints))
	for i, ep := range endpoints {
		eps[i] = redactEndpoint(ep)
	}
	timeout := DefaultDialTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   eps,
		TLS:         tlsConfig,
		DialTimeout: timeout,
		// The client's own logging would repeat, per retry, what the
		// Store's errors already say.
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, &OpError{Op: "dial", Endpoints: eps, Err: err}
	}
	s, err := newStore(ctx, cli, true, opts)
	if err != nil {
		cli.Close()
		return nil, err
	}
	return s, nil
}
