package etcdtest_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/etcdtest"
)

func TestMain(m *testing.M) {
	etcdtest.Main()
	os.Exit(m.Run())
}

// TestStopRestartKeepsData checks both modes: a key and its lease written
// before a stop (or a kill) are there after the restart, on the same
// endpoint, and calls fail while the server is down.
func TestStopRestartKeepsData(t *testing.T) {
	for name, start := range map[string]func(testing.TB) *etcdtest.Server{
		"in-process":    etcdtest.Start,
		"child-process": etcdtest.StartProcess,
	} {
		t.Run(name, func(t *testing.T) {
			srv := start(t)
			cli := srv.Client(t)
			ctx := t.Context()
			lease, err := cli.Grant(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if lease.TTL != 1 {
				t.Errorf("a 1 s lease was granted for %d s; the fixture's minimum should be 1 s", lease.TTL)
			}
			if _, err := cli.Put(ctx, "k", "v"); err != nil {
				t.Fatal(err)
			}
			srv.Kill()
			if srv.Running() {
				t.Error("Running after Kill")
			}
			down, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			_, err = cli.Get(down, "k")
			cancel()
			if err == nil {
				t.Error("Get succeeded with the server down")
			}
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			up, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			resp, err := cli.Get(up, "k")
			if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
				t.Fatalf("after restart Get = %v, %v; want the value written before", resp, err)
			}
		})
	}
}
