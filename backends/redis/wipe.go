package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// ErrFeedWiped: the database Follow began on is no longer the one its
// connections use (SWAPDB; FLUSHALL and FLUSHDB also announce themselves),
// so the feed resynchronises.
var ErrFeedWiped = errors.New("the database was swapped or emptied behind the feed's back")

// A feed marks the database it follows with a key of its own, outside any
// prefix a Breaker uses, and checks with each heartbeat that the key is
// still there (one GETEX, sent with each heartbeat's PING and answered
// while the PING's answer travels): SWAPDB sends no
// invalidation. The key lives markerTTL past the last check, so a follower
// that dies leaves it behind for that long; one that ends deletes it. A
// server whose ACL refuses the key gets no such check (docs/backends.md).
const (
	markerPrefix = "kvbreaker:follow:"
	markerTTL    = time.Hour
)

// isMarker reports whether key is a feed's marker: it lies under the
// empty prefix a Breaker without Prefixed follows and lists, and is no
// record, so a feed delivers nothing of it and List leaves it out (no host
// key has its form: HostKey never yields "kvbreaker:follow:…").
func isMarker(key string) bool { return strings.HasPrefix(key, markerPrefix) }

// markDB sets the session's marker and returns its key, or "" when the
// ACL refuses it.
func (f *follower) markDB(ctx context.Context, c *goredis.Conn) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, f.callTimeout())
	defer cancel()
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	key := markerPrefix + hex.EncodeToString(b)
	err := c.SetNX(ctx, key, "1", markerTTL).Err()
	switch {
	case err != nil && strings.HasPrefix(err.Error(), "NOPERM"):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("mark the database: %w", err)
	}
	return key, nil
}

// unmarkDB deletes the session's marker.
func unmarkDB(ctx context.Context, c *goredis.Conn, key string) {
	if key == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = c.Del(ctx, key).Err() // else it expires
}

// checkDB confirms that the database still holds the session's marker
// ("" checks nothing), and keeps it alive.
func (f *follower) checkDB(ctx context.Context, c *goredis.Conn, key string) error {
	if key == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, f.callTimeout())
	defer cancel()
	err := c.GetEx(ctx, key, markerTTL).Err()
	switch {
	case errors.Is(err, goredis.Nil):
		return fmt.Errorf("%w: its marker %s is gone", ErrFeedWiped, key)
	case err != nil:
		return fmt.Errorf("check the database: %w", err)
	}
	return nil
}
