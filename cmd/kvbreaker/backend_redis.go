package main

import (
	"context"
	"errors"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/driver"
)

// checkRedisURL checks --redis-url without connecting.
func (f *backendFlags) checkRedisURL() error {
	if _, err := goredis.ParseURL(f.redisURL); err != nil {
		return usagef("%s is %q: want redis://host:port/db or rediss://host:port/db (%v)", f.name("redis-url"), redactURL(f.redisURL), err)
	}
	return nil
}

// openRedis dials the server (redis.Dial) and checks that it answers a
// PING: a refused port is reported within redis.ConnectTimeout, a silent
// server when ctx (--timeout) ends.
func openRedis(ctx context.Context, f *backendFlags) (*conn, error) {
	o, err := goredis.ParseURL(f.redisURL)
	if err != nil {
		return nil, usagef("%s: %v", f.name("redis-url"), err)
	}
	s, err := redis.Dial(ctx, f.redisURL)
	if err != nil {
		if ue, ok := errors.AsType[*driver.UnreachableError](err); ok {
			why := ue.Reason
			if ctx.Err() != nil {
				why = "no answer within " + f.bound
			}
			return nil, &reachError{backend: "redis", endpoint: strings.Join(ue.Endpoints, ", "), why: why, err: err}
		}
		return nil, err
	}
	return &conn{describe: "redis at " + o.Addr + " db " + strconv.Itoa(o.DB), store: s}, nil
}
