package main

import (
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// TestRedisBackend: list, inspect, reset and check with --backend redis
// against a real server this test starts, the URL from the flag or from
// $KVBREAKER_REDIS_URL; a refused port is reported as such within 2 s.
func TestRedisBackend(t *testing.T) {
	srv := redistest.MustStart(t)
	cli := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer cli.Close()
	st, err := redis.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	backendScenario{
		backend: "redis",
		store:   st,
		flags:   []string{"--redis-url", srv.URL()},
		env:     map[string]string{"KVBREAKER_REDIS_URL": srv.URL()},
		dead:    func(addr string) []string { return []string{"--redis-url", "redis://" + addr + "/0"} },
	}.run(t)
	code, _, errOut := runT(t, "inspect", "--backend", "redis", "--redis-url", "http://x", "x.example")
	if code == exitOK || !strings.Contains(errOut, "want redis://host:port/db") {
		t.Errorf("inspect with an http URL: exit %d, stderr %q", code, errOut)
	}
}
