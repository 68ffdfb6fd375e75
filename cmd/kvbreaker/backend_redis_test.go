package main

import (
	"net"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/testservers/redistest"
)

// TestRedisBackend: list, inspect, reset and check with --backend redis
// against a real server this test starts, the URL from the flag or from
// $KVBREAKER_REDIS_URL; a refused port is reported as such within 2 s.
func TestRedisBackend(t *testing.T) {
	srv := redistest.MustStart(t)
	ctx := t.Context()
	cli := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer cli.Close()
	st, err := redis.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "cli-" + randomHex(4) + "/"
	p, err := kvbreaker.Prefixed(st, prefix)
	if err != nil {
		t.Fatal(err)
	}
	b, err := kvbreaker.New(p, kvbreaker.Settings{FailureThreshold: 2})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := b.Failure(ctx, "down.example"); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"--backend", "redis", "--redis-url", srv.URL(), "--prefix", prefix}

	l := listJSON(t, args...)
	if got := strings.Join(hostNames(l), ","); got != "down.example" {
		t.Errorf("list: hosts %q, want down.example", got)
	}
	code, out, errOut := runT(t, append([]string{"inspect"}, append(args, "down.example")...)...)
	if code != exitOK || !strings.Contains(out, "open") {
		t.Errorf("inspect: exit %d\n%s\n%s", code, out, errOut)
	}
	// The same from the environment.
	t.Setenv("KVBREAKER_REDIS_URL", srv.URL())
	code, out, errOut = runT(t, "reset", "--backend", "redis", "--prefix", prefix, "--yes", "down.example")
	if code != exitOK {
		t.Errorf("reset: exit %d\n%s\n%s", code, out, errOut)
	}
	if st, err := b.Inspect(ctx, "down.example"); err != nil || st.Found {
		t.Errorf("after reset Inspect = %+v, %v; want no record", st, err)
	}
	code, out, errOut = runT(t, "check", "--backend", "redis", "--quick", "--quiet", "--timeout", "2m")
	if code != exitOK {
		t.Errorf("check: exit %d\n%s\n%s", code, out, errOut)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	start := time.Now()
	code, out, errOut = runT(t, "inspect", "--backend", "redis", "--redis-url", "redis://"+dead+"/0", "x.example")
	want := "cannot reach redis at " + dead + ": connection refused"
	if code != exitFail || !strings.Contains(errOut, want) {
		t.Errorf("inspect on a closed port: exit %d, stderr %q, stdout %q; want %q", code, errOut, out, want)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %v to report a closed port", took)
	}
	code, _, errOut = runT(t, "inspect", "--backend", "redis", "--redis-url", "http://x", "x.example")
	if code == exitOK || !strings.Contains(errOut, "want redis://host:port/db") {
		t.Errorf("inspect with an http URL: exit %d, stderr %q", code, errOut)
	}
}
