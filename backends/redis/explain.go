package redis

import (
	"errors"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/adapter"
)

// Explain says what to change when a Redis server answered a request with
// a refusal: a missing or wrong password, an ACL user without the commands
// the store runs, a database number the server lacks. where names the
// server ("redis at host:port db N", Store.String); "" takes the name
// Dial's and DialCluster's errors carry. setting names where the URL came
// from ("--redis-url", "$REDIS_URL"; "the URL" if empty). Any other error
// is returned with where in front, or as it is when it names where itself.
// The result wraps err; it never shows the password.
func Explain(err error, where, setting string) error {
	other := func() error { return fmt.Errorf("%s: %w", where, err) }
	if where == "" {
		r, ok := errors.AsType[*refusal](err)
		if !ok {
			return err
		}
		where, other = r.where, func() error { return err }
	}
	var re goredis.Error
	if !errors.As(err, &re) {
		return other()
	}
	if setting == "" {
		setting = "the URL"
	}
	msg := re.Error()
	switch {
	case goredis.HasErrorPrefix(err, "NOAUTH"):
		return adapter.Explained(err, "%s requires a password (%s): give it in %s as redis://:PASSWORD@host:port/db, or redis://USER:PASSWORD@host:port/db for an ACL user",
			where, msg, setting)
	case goredis.HasErrorPrefix(err, "WRONGPASS"), strings.Contains(msg, "invalid password"):
		return adapter.Explained(err, "%s refused the user name or password in %s (%s): check them (redis://USER:PASSWORD@host:port/db; %%-escape reserved characters in the password)",
			where, setting, msg)
	case goredis.HasErrorPrefix(err, "NOPERM"):
		return adapter.Explained(err, "%s: the ACL user of %s may not run what kvbreaker needs (%s): on your fleet's keys (~PREFIX*) and the channel &__redis__:invalidate it needs +ping +info +client|setname +client|id +hmget +evalsha +eval +get +hgetall +lrange +smembers +zrange +xrange +dump +type +hset +hdel +del +pexpire +pttl +time +scan +hexists +subscribe +client|tracking +publish (docs/security.md)",
			where, setting, msg)
	case strings.Contains(msg, "DB index is out of range"), strings.Contains(msg, "invalid DB index"):
		return adapter.Explained(err, "%s: the server has no such database (%s): put a database it has in %s's path, redis://host:port/0 (its \"databases\" setting, 16 by default)",
			where, msg, setting)
	}
	return other()
}

// A refusal is the server's answer to Dial's or DialCluster's first
// requests (a wrong password, an ACL user without PING), named by the
// deployment that gave it: Explain finds where in it.
type refusal struct {
	where string
	err   error
}

func (e *refusal) Error() string { return e.where + ": " + e.err.Error() }
func (e *refusal) Unwrap() error { return e.err }
