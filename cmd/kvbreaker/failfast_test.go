package main

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// closedPort returns an address on 127.0.0.1 where nothing listens: a
// port the kernel just handed out, released.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// silentListener accepts connections and never answers (a hung server, a
// firewall that accepts): it holds them until the test ends.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// endpointArgs are a backend's connection flags pointed at addr.
func endpointArgs(backend, addr string) []string {
	switch backend {
	case "etcd":
		return []string{"--backend", "etcd", "--etcd-endpoints", "http://" + addr}
	case "dynamodb":
		return []string{"--backend", "dynamodb", "--dynamodb-table", dynTable, "--dynamodb-endpoint", "http://" + addr}
	case "cloudflarekv":
		return []string{"--backend", "cloudflarekv", "--cf-account", "acct", "--cf-namespace", "ns", "--cf-base-url", "http://" + addr + "/client/v4/"}
	}
	panic(backend)
}

// commandArgs are each store command's arguments around the connection
// flags (check's --timeout is long: its connection is bounded apart).
var commandArgs = map[string][]string{
	"check":   {"check", "--quick", "--quiet"},
	"inspect": {"inspect", "a.example"},
	"reset":   {"reset", "--yes", "a.example"},
	"list":    {"list"},
}

// failFastBound tells failing fast from waiting out a timeout: a command
// that kept trying a closed port or a silent server until its connection's
// bound (maxConnect, also inspect's default --timeout) took at least that
// long, twice this. A failure that is fast on an idle machine has taken over
// 3 s on a loaded one, so a bound near its typical time measures the
// machine, not the command.
const failFastBound = maxConnect / 2

// TestFailFastClosedPort: a closed port is reported within about 2 s as
// "cannot reach <backend> at <endpoint>: connection refused", by every
// command that connects, for every network backend, not after a 30 s
// timeout with "grant via …: context deadline exceeded", which does not
// say whether anything listened.
func TestFailFastClosedPort(t *testing.T) {
	addr := closedPort(t)
	for _, backend := range []string{"etcd", "dynamodb", "cloudflarekv"} {
		for name, args := range commandArgs {
			t.Run(backend+"/"+name, func(t *testing.T) {
				start := time.Now()
				code, out, errOut := runT(t, append(args, endpointArgs(backend, addr)...)...)
				took := time.Since(start)
				want := "Error: cannot reach " + backend + " at http://" + addr
				if code != exitFail || !strings.Contains(errOut, want) || !strings.Contains(errOut, ": connection refused") {
					t.Errorf("exit %d, stderr %q, stdout %q; want exit 1 and %q ... connection refused", code, errOut, out, want)
				}
				if took >= failFastBound {
					t.Errorf("took %v: want a fast failure (about 2 s), not one after the connection's bound", took)
				}
			})
		}
	}
}

// TestFailFastSilentServer: a server that accepts the connection but never
// answers is bounded by --timeout, and the message says so.
func TestFailFastSilentServer(t *testing.T) {
	addr := silentListener(t)
	for _, backend := range []string{"etcd", "dynamodb", "cloudflarekv"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			code, out, errOut := runT(t, append([]string{"inspect", "--timeout", "1s", "a.example"}, endpointArgs(backend, addr)...)...)
			took := time.Since(start)
			want := "Error: cannot reach " + backend + " at http://" + addr
			if code != exitFail || !strings.Contains(errOut, want) || !strings.Contains(errOut, "no answer within --timeout 1s") {
				t.Errorf("exit %d, stderr %q, stdout %q", code, errOut, out)
			}
			// Silence is no refusal: no credential is to blame.
			if strings.Contains(errOut, "are the API token") {
				t.Errorf("a silent server's error points at the credentials: %q", errOut)
			}
			if took < time.Second || took >= failFastBound {
				t.Errorf("took %v: want --timeout 1s, not the connection's bound of %v", took, maxConnect)
			}
		})
	}
	// check bounds its connection apart from its --timeout of minutes.
	t.Run("check", func(t *testing.T) {
		code, _, errOut := runT(t, append([]string{"check", "--timeout", "1500ms", "--quiet"}, endpointArgs("etcd", addr)...)...)
		if code != exitFail || !strings.Contains(errOut, "no answer within --timeout 1.5s") {
			t.Errorf("exit %d, stderr %q", code, errOut)
		}
	})
}

// TestFailFastSilentRedis: a Redis server, or a Cluster's seed, that
// accepts the connection but never answers is bounded by --timeout, and
// the message says so, as other backends' do.
func TestFailFastSilentRedis(t *testing.T) {
	addr := silentListener(t)
	for name, args := range map[string][]string{
		"server":  {"--redis-url", "redis://" + addr + "/0"},
		"cluster": {"--redis-cluster", "--redis-url", "redis://" + addr},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runT(t, append([]string{"inspect", "--timeout", "1s", "--backend", "redis", "a.example"}, args...)...)
			if want := "Error: cannot reach redis at " + addr + ": no answer within --timeout 1s"; code != exitFail || !strings.Contains(errOut, want) {
				t.Errorf("exit %d, stderr %q, stdout %q; want %q", code, errOut, out, want)
			}
		})
	}
}
