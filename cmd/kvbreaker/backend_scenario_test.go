package main

import (
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
)

// backendScenario is what TestRedisBackend and TestPostgresBackend share:
// list, inspect, reset and check against a real server, the connection from
// the flags or from the environment, and a refused port reported as such.
type backendScenario struct {
	backend string            // --backend
	store   driver.Store      // the server's store, without a prefix
	flags   []string          // the connection flags
	env     map[string]string // the same connection, from the environment
	// dead is the connection flags for addr, where nothing listens (nil
	// for a store without a server).
	dead func(addr string) []string
}

func (sc backendScenario) run(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	prefix := "cli-" + randomHex(4) + "/"
	p, err := kvbreaker.Prefixed(sc.store, prefix)
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
	args := append([]string{"--backend", sc.backend, "--prefix", prefix}, sc.flags...)

	l := listJSON(t, args...)
	if got := strings.Join(hostNames(l), ","); got != "down.example" {
		t.Errorf("list: hosts %q, want down.example", got)
	}
	code, out, errOut := runT(t, append([]string{"inspect"}, append(args, "down.example")...)...)
	if code != exitOK || !strings.Contains(out, "open") {
		t.Errorf("inspect: exit %d\n%s\n%s", code, out, errOut)
	}
	// The same from the environment.
	for k, v := range sc.env {
		t.Setenv(k, v)
	}
	code, out, errOut = runT(t, "reset", "--backend", sc.backend, "--prefix", prefix, "--yes", "down.example")
	if code != exitOK {
		t.Errorf("reset: exit %d\n%s\n%s", code, out, errOut)
	}
	if st, err := b.Inspect(ctx, "down.example"); err != nil || st.Found {
		t.Errorf("after reset Inspect = %+v, %v; want no record", st, err)
	}
	code, out, errOut = runT(t, "check", "--backend", sc.backend, "--quick", "--quiet", "--timeout", "2m")
	if code != exitOK {
		t.Errorf("check: exit %d\n%s\n%s\nwhat failed, again:\n%s", code, out, errOut, failedCases(out))
	}
	if followed := map[string]bool{"etcd": true, "redis": true, "postgres": true, "nats": true, "sqlite": true}; followed[sc.backend] &&
		!strings.Contains(out, "mirror, changes behind the adapters' back: ") {
		t.Errorf("check: no line on what the feed cannot see\n%s", out)
	}

	if sc.dead == nil {
		return // a file, not a server
	}
	dead := closedPort(t)
	commands := [][]string{{"inspect", "x.example"}}
	if backends[sc.backend].create != nil {
		commands = append(commands, []string{"init"})
	}
	for _, args := range commands {
		start := time.Now()
		code, out, errOut = runT(t, append(append([]string{args[0], "--backend", sc.backend}, sc.dead(dead)...), args[1:]...)...)
		// etcd names the endpoint as given (https://host:port), the others
		// host:port.
		want := "cannot reach " + sc.backend + " at " + dead + ": connection refused"
		if code != exitFail || !strings.Contains(errOut, "cannot reach "+sc.backend+" at ") || !strings.Contains(errOut, dead+": connection refused") {
			t.Errorf("%s on a closed port: exit %d, stderr %q, stdout %q; want %q", args[0], code, errOut, out, want)
		}
		if took := time.Since(start); took >= failFastBound {
			t.Errorf("%s took %v to report a closed port", args[0], took)
		}
	}
}
