package redis

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/adapter"
)

// List implements driver.Lister with SCAN MATCH <prefix>*, on each master
// of a Cluster (or shard of a Ring) in turn, in the order of their
// addresses; tombstones are left out (one pipelined HEXISTS per page). Keys
// of other types are listed: Get reads them as foreign data (see the
// package doc), which the next write replaces.
//
// SCAN may answer more keys than a page has room for. The keys left over
// travel in the cursor, beside the node and SCAN's next cursor, and lead
// the next page: scanning the same SCAN cursor again would not do, as a
// table resized between the calls (by writes, deletes or expiry) answers
// other buckets there, and keys of those skipped as "already returned"
// would be lost. So SCAN's guarantees hold as they are: a key present
// during the whole listing is listed, at least once; a key written or
// deleted meanwhile may or may not be.
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	const op = adapter.OpList
	if err := s.gate().List(prefix, limit); err != nil {
		return nil, "", err
	}
	nodes, err := s.nodes(ctx)
	if err != nil {
		return nil, "", opError(op, prefix, err)
	}
	pos, err := parseCursor(cursor, nodes)
	if err != nil {
		return nil, "", opError(op, prefix, err)
	}
	match := globEscape(prefix) + "*"
	var keys []string
	keys, pos.pending = cut(pos.pending, limit)
	for len(keys) < limit && pos.node < len(nodes) {
		room := limit - len(keys)
		page, nc, err := nodes[pos.node].c.Scan(ctx, pos.scan, match, int64(max(room, 10))).Result()
		if err != nil {
			return nil, "", opError(op, prefix, err)
		}
		slices.Sort(page)
		var taken []string
		taken, pos.pending = cut(slices.Compact(page), room)
		keys = append(keys, taken...)
		if pos.scan = nc; nc == 0 {
			pos.node++
		}
	}
	next := ""
	if pos.node < len(nodes) || len(pos.pending) > 0 {
		next = pos.String(nodes)
	}
	live, err := s.live(ctx, keys)
	if err != nil {
		return nil, "", opError(op, prefix, err)
	}
	return live, next, nil
}

// cut returns the first n of keys and the rest (nil when none is left).
func cut(keys []string, n int) (head, rest []string) {
	if len(keys) <= n {
		return keys, nil
	}
	return keys[:n], keys[n:]
}

// live returns the keys that hold a value (not tombstones: a hash without
// v; a key of another type is foreign data, a value), in one pipelined
// round trip (per node, in a Cluster).
func (s *Store) live(ctx context.Context, keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	cmds := make([]*goredis.BoolCmd, len(keys))
	_, _ = s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.HExists(ctx, k, FieldValue)
		}
		return nil
	})
	live := keys[:0]
	for i, k := range keys {
		if isMarker(k) {
			continue
		}
		switch err := cmds[i].Err(); {
		case goredis.HasErrorPrefix(err, "WRONGTYPE"), err == nil && cmds[i].Val():
			live = append(live, k)
		case err != nil:
			return nil, err
		}
	}
	return live, nil
}

// node is one server List scans.
type node struct {
	addr string
	c    goredis.Cmdable
}

// nodes returns the servers holding the keyspace, sorted by address: the
// masters of a Cluster, the shards of a Ring, or the client itself.
func (s *Store) nodes(ctx context.Context) ([]node, error) {
	var (
		mu    sync.Mutex
		nodes []node
	)
	add := func(_ context.Context, c *goredis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		nodes = append(nodes, node{addr: c.Options().Addr, c: c})
		return nil
	}
	switch c := s.c.(type) {
	case *goredis.ClusterClient:
		if err := c.ForEachMaster(ctx, add); err != nil {
			return nil, err
		}
	case *goredis.Ring:
		if err := c.ForEachShard(ctx, add); err != nil {
			return nil, err
		}
	default:
		return []node{{c: s.c}}, nil
	}
	if len(nodes) == 0 {
		return nil, errors.New("no master to scan")
	}
	slices.SortFunc(nodes, func(a, b node) int { return strings.Compare(a.addr, b.addr) })
	return nodes, nil
}

// position is where a listing resumes: the keys a SCAN call answered that
// did not fit in the page, then the node and its SCAN cursor (node ==
// len(nodes): every node scanned).
type position struct {
	pending []string
	node    int
	scan    uint64
}

// named reports whether cursors name their node (a multi-node client).
func named(nodes []node) bool { return len(nodes) > 1 || nodes[0].addr != "" }

// String is the cursor, opaque to callers: base64url of the node's address
// ("" once every node is scanned), SCAN's cursor and the pending keys, each
// string length-prefixed, as keys may hold any bytes.
func (p position) String(nodes []node) string {
	var b []byte
	addr := ""
	if p.node < len(nodes) {
		addr = nodes[p.node].addr
	}
	b = append(b, cursorVersion)
	b = binary.AppendUvarint(b, uint64(len(addr)))
	b = append(b, addr...)
	b = binary.AppendUvarint(b, boolBit(p.node < len(nodes)))
	b = binary.AppendUvarint(b, p.scan)
	b = binary.AppendUvarint(b, uint64(len(p.pending)))
	for _, k := range p.pending {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

const cursorVersion = 1

func boolBit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func parseCursor(cursor string, nodes []node) (position, error) {
	var p position
	if cursor == "" {
		return p, nil
	}
	bad := func() (position, error) {
		return position{}, fmt.Errorf("invalid cursor %q: pass the next cursor of the previous page", cursor)
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) == 0 || b[0] != cursorVersion {
		return bad()
	}
	b = b[1:]
	uvarint := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	str := func() (string, bool) {
		n, ok := uvarint()
		if !ok || n > uint64(len(b)) {
			return "", false
		}
		s := string(b[:n])
		b = b[n:]
		return s, true
	}
	addr, ok1 := str()
	scanning, ok2 := uvarint()
	scan, ok3 := uvarint()
	n, ok4 := uvarint()
	if !ok1 || !ok2 || !ok3 || !ok4 || scanning > 1 || n > uint64(len(b)) {
		return bad()
	}
	p.scan = scan
	p.pending = make([]string, 0, n)
	for range n {
		k, ok := str()
		if !ok {
			return bad()
		}
		p.pending = append(p.pending, k)
	}
	if len(b) != 0 {
		return bad()
	}
	switch {
	case scanning == 0:
		p.node = len(nodes)
	case !named(nodes):
		if addr != "" {
			return position{}, fmt.Errorf("cursor %q names node %s, but the client is not a Cluster or Ring: start the listing again", cursor, addr)
		}
	default:
		i := slices.IndexFunc(nodes, func(n node) bool { return n.addr == addr })
		if i < 0 {
			return position{}, fmt.Errorf("cursor %q names %s, no longer a master: start the listing again", cursor, addr)
		}
		p.node = i
	}
	return p, nil
}

// globEscape quotes the characters SCAN's MATCH pattern treats specially.
func globEscape(s string) string {
	if !strings.ContainsAny(s, `*?[]\`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
