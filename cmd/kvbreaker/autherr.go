//go:build !simulateonly

package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"
)

// The server's refusals an operator fixes with a flag: each message names
// the endpoint (never a credential), what the server said, and the flag or
// environment variable that fixes it.

// redisServerError explains an error a Redis server answered the command's
// first request with (where is "redis at host:port db N" or "redis cluster
// via …"); any other error is returned with where in front.
func redisServerError(where string, f *backendFlags, err error) error {
	var re goredis.Error
	if !errors.As(err, &re) {
		return fmt.Errorf("%s: %w", where, err)
	}
	msg := re.Error()
	url := f.name("redis-url")
	switch {
	case goredis.HasErrorPrefix(err, "NOAUTH"):
		return fmt.Errorf("%s requires a password (%s): give it in %s as redis://:PASSWORD@host:port/db, or redis://USER:PASSWORD@host:port/db for an ACL user (best through $%s, not the command line: ps shows flags)",
			where, msg, url, envOf("redis-url"))
	case goredis.HasErrorPrefix(err, "WRONGPASS"), strings.Contains(msg, "invalid password"):
		return fmt.Errorf("%s refused the user name or password in %s (%s): check them (redis://USER:PASSWORD@host:port/db; %%-escape reserved characters in the password)",
			where, url, msg)
	case goredis.HasErrorPrefix(err, "NOPERM"):
		return fmt.Errorf("%s: the ACL user of %s may not run what kvbreaker needs (%s): on your fleet's keys (~PREFIX*) and the channel &__redis__:invalidate it needs +ping +info +client|setname +client|id +hmget +evalsha +eval +get +hgetall +lrange +smembers +zrange +xrange +dump +type +hset +hdel +del +pexpire +pttl +time +scan +hexists +subscribe +client|tracking +publish (docs/security.md)",
			where, url, msg)
	case strings.Contains(msg, "DB index is out of range"), strings.Contains(msg, "invalid DB index"):
		return fmt.Errorf("%s: the server has no such database (%s): put a database it has in %s's path, redis://host:port/0 (its \"databases\" setting, 16 by default)",
			where, msg, url)
	}
	return fmt.Errorf("%s: %w", where, err)
}

// pgServerError explains a failed connection or first statement of
// PostgreSQL at addr: the server's own refusal (a *pgconn.PgError, which pgx
// puts after a "tls error" line when sslmode=prefer first tried TLS), with
// the flag or variable that fixes it. Any other error is returned with the
// address in front.
func pgServerError(addr string, f *backendFlags, cfg *pgxpool.Config, err error) error {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	if !ok {
		return fmt.Errorf("postgres at %s: %w", addr, err)
	}
	user, db := cfg.ConnConfig.User, cfg.ConnConfig.Database
	url := f.name("postgres-url")
	said := pe.Severity + ": " + pe.Message + " (SQLSTATE " + pe.Code + ")"
	switch pe.Code {
	case "28P01": // invalid_password
		fix := "set $PGPASSWORD, or a ~/.pgpass line (host:port:database:user:password) for this server"
		if cfg.ConnConfig.Password == "" {
			return fmt.Errorf("postgres at %s wants a password for user %q and none was given (%s): %s", addr, user, said, fix)
		}
		return fmt.Errorf("postgres at %s refused the password of user %q (%s): check it where it came from ($PGPASSWORD, ~/.pgpass or %s)", addr, user, said, url)
	case "28000": // invalid_authorization_specification: no such role, no pg_hba.conf entry
		return fmt.Errorf("postgres at %s refused user %q for database %q (%s): name a user the server admits in %s (postgres://USER@host:port/db, user=USER) or $PGUSER; a \"no pg_hba.conf entry\" is the server's pg_hba.conf to change",
			addr, user, db, said, url)
	case "3D000": // invalid_catalog_name
		return fmt.Errorf("postgres at %s has no database %q (%s): name an existing one in %s (postgres://user@host:port/DATABASE, dbname=DATABASE) or $PGDATABASE",
			addr, db, said, url)
	case "42501": // insufficient_privilege
		return fmt.Errorf("postgres at %s: user %q lacks a privilege on table %s (%s): a database owner can GRANT SELECT, INSERT, UPDATE, DELETE ON %s, and USAGE ON SEQUENCE %s_version, TO %q",
			addr, user, f.pgTable, said, f.pgTable, f.pgTable, user)
	}
	return fmt.Errorf("postgres at %s: user %q, database %q: %s", addr, user, db, said)
}
