package etcd

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// List implements driver.Lister: one range read of up to limit keys that
// begin with prefix and sort after cursor, in byte order (keys only, no
// values), and the cursor of the next page: the page's last key while etcd
// says more follow, "" after the last page. A key whose lease expired is
// gone from etcd already (the leader deletes it within CheckInterval and
// the reuse slack, as Get sees it). An empty prefix lists the whole
// keyspace the client may read.
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	const op = adapter.OpList
	if err := s.gate().List(prefix, limit); err != nil {
		return nil, "", err
	}
	start := prefix
	if cursor >= start {
		start = cursor + "\x00" // the first key after cursor
	}
	if start == "" {
		start = "\x00" // etcd has no empty key; every key is at least this
	}
	// For an empty prefix, "\x00" as the range end means "to the end".
	end := clientv3.GetPrefixRangeEnd(prefix)
	if end != "\x00" && start >= end {
		return nil, "", nil // the cursor is past every key under prefix
	}
	resp, err := s.cli.Get(ctx, start,
		clientv3.WithRange(end), clientv3.WithLimit(int64(limit)), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, "", s.callError(op, prefix, err)
	}
	keys := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if !isBeatKey(kv.Key) { // a feed's beat (beat.go), not a record
			keys = append(keys, string(kv.Key))
		}
	}
	next := ""
	if resp.More && len(resp.Kvs) > 0 {
		next = string(resp.Kvs[len(resp.Kvs)-1].Key)
	}
	return keys, next, nil
}

// Expiry implements driver.ExpiryReader: the remaining TTL of the key's
// lease (LeaseTimeToLive, in the whole seconds etcd reports, rounded down:
// with lease reuse, up to the reuse slack past the TTL last written), or
// driver.NoExpiry for a key stored without a lease, which only a write
// (every write carries a lease) or a delete removes. An absent key, or one
// whose lease has just expired, is driver.ErrNotFound. Two requests: a
// linearizable read, then the lease's.
func (s *Store) Expiry(ctx context.Context, key string) (time.Duration, error) {
	const op = adapter.OpExpiry
	if s.closed.Load() {
		return 0, opError(op, key, ErrClosed)
	}
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return 0, s.callError(op, key, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, driver.ErrNotFound
	}
	lease := clientv3.LeaseID(resp.Kvs[0].Lease)
	if lease == clientv3.NoLease {
		return driver.NoExpiry, nil
	}
	ttl, err := s.cli.TimeToLive(ctx, lease)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && ttl.TTL < 0) {
		// The lease expired (or was revoked) since the read, and its keys
		// with it.
		return 0, driver.ErrNotFound
	}
	if err != nil {
		return 0, s.callError(op, key, err)
	}
	return time.Duration(ttl.TTL) * time.Second, nil
}

var _ driver.ExpiryReader = (*Store)(nil)
