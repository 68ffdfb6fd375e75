package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// List implements driver.Lister: one range read of up to limit keys that
// begin with prefix and sort after cursor, in byte order (keys only, no
// values), and the cursor of the next page: the page's last key while etcd
// says more follow, "" after the last page. A key whose lease expired is
// gone from etcd already (the leader deletes it within CheckInterval and
// the reuse slack, as Get sees it). An empty prefix lists the whole
// keyspace the client may read.
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	const op = "list"
	if s.closed.Load() {
		return nil, "", opError(op, prefix, ErrClosed)
	}
	if limit < 1 {
		return nil, "", opError(op, prefix, fmt.Errorf("limit %d: want at least 1", limit))
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
	keys := make([]string, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		keys[i] = string(kv.Key)
	}
	next := ""
	if resp.More && len(keys) > 0 {
		next = keys[len(keys)-1]
	}
	return keys, next, nil
}
