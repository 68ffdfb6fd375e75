package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// List implements driver.Lister with SCAN MATCH <prefix>*, on each master
// of a Cluster (or shard of a Ring) in turn, in the order of their
// addresses; tombstones are left out (one pipelined HEXISTS per page). Keys
// of other types are listed: Get reads them as foreign data (see the
// package doc), which the next write replaces.
// The cursor names the node, its SCAN cursor and the last key of that SCAN
// call already returned (SCAN may answer more keys than asked for): each
// call's keys are taken in key order, so a call made again after the
// keyspace changed (a rehash reorders its answer) resumes after that key,
// not after a count of keys that may now be others. SCAN's guarantees hold: a key present during the whole listing is
// listed, at least once; a key written or deleted meanwhile may or may not
// be.
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	const op = "list"
	if s.closed.Load() {
		return nil, "", opError(op, prefix, ErrClosed)
	}
	if limit < 1 {
		return nil, "", opError(op, prefix, fmt.Errorf("limit %d: want at least 1", limit))
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
	next := ""
	for len(keys) < limit {
		n := nodes[pos.node]
		page, nc, err := n.c.Scan(ctx, pos.scan, match, int64(max(limit, 10))).Result()
		if err != nil {
			return nil, "", opError(op, prefix, err)
		}
		slices.Sort(page)
		page = slices.Compact(page)
		if pos.resume {
			i, found := slices.BinarySearch(page, pos.after)
			if found {
				i++
			}
			page = page[i:]
		}
		if room := limit - len(keys); len(page) > room {
			keys = append(keys, page[:room]...)
			pos.after, pos.resume = page[room-1], true
			next = pos.String(nodes)
			break
		}
		keys = append(keys, page...)
		pos.after, pos.resume, pos.scan = "", false, nc
		if nc == 0 {
			if pos.node++; pos.node == len(nodes) {
				next = "" // the last page
				break
			}
		}
		next = pos.String(nodes)
	}
	live, err := s.live(ctx, keys)
	if err != nil {
		return nil, "", opError(op, prefix, err)
	}
	return live, next, nil
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

// position is where a listing resumes.
type position struct {
	node   int
	scan   uint64
	after  string // resume: the last key of this SCAN call returned
	resume bool
}

// named reports whether cursors name their node (a multi-node client).
func named(nodes []node) bool { return len(nodes) > 1 || nodes[0].addr != "" }

// String is the cursor: "<scan>." and, when resuming within a SCAN call,
// "+<last key returned>", after "<addr>|" on a multi-node client.
func (p position) String(nodes []node) string {
	c := strconv.FormatUint(p.scan, 10) + "."
	if p.resume {
		c += "+" + p.after
	}
	if named(nodes) {
		return nodes[p.node].addr + "|" + c
	}
	return c
}

func parseCursor(cursor string, nodes []node) (position, error) {
	var p position
	if cursor == "" {
		return p, nil
	}
	bad := func() (position, error) {
		return position{}, fmt.Errorf("invalid cursor %q: pass the next cursor of the previous page", cursor)
	}
	c := cursor
	if addr, rest, ok := strings.Cut(cursor, "|"); ok && named(nodes) {
		i := slices.IndexFunc(nodes, func(n node) bool { return n.addr == addr })
		if i < 0 {
			return position{}, fmt.Errorf("cursor %q names %s, no longer a master: start the listing again", cursor, addr)
		}
		p.node, c = i, rest
	}
	scan, rest, ok := strings.Cut(c, ".")
	if !ok {
		return bad()
	}
	var err error
	if p.scan, err = strconv.ParseUint(scan, 10, 64); err != nil {
		return bad()
	}
	switch {
	case rest == "":
	case strings.HasPrefix(rest, "+"):
		p.after, p.resume = rest[1:], true
	default:
		return bad()
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
