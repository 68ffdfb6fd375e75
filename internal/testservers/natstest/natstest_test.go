package natstest_test

import (
	"bufio"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/testservers/natstest"
)

// info dials addr and returns the INFO the server greets a client with,
// so this package's tests need no NATS client.
func info(t *testing.T, addr string) (map[string]any, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return nil, err
	}
	body, ok := strings.CutPrefix(strings.TrimSpace(line), "INFO ")
	if !ok {
		t.Fatalf("greeting %q is no INFO", line)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("INFO %q: %v", body, err)
	}
	return m, nil
}

// TestKillRestart: the server serves JetStream on 127.0.0.1, refuses
// connections once killed, and serves again on the same address after a
// restart.
func TestKillRestart(t *testing.T) {
	srv := natstest.MustStart(t)
	m, err := info(t, srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if m["jetstream"] != true || m["host"] != "127.0.0.1" {
		t.Errorf("INFO = %v, want JetStream on 127.0.0.1", m)
	}
	srv.Kill()
	if _, err := info(t, srv.Addr()); err == nil {
		t.Error("a killed server still answers")
	}
	if err := srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := info(t, srv.Addr()); err != nil {
		t.Errorf("after the restart: %v", err)
	}
}

// TestCluster: three members of one cluster, each greeting with its own
// name and the cluster's.
func TestCluster(t *testing.T) {
	servers := natstest.MustStartCluster(t, 3)
	names := map[any]bool{}
	for _, s := range servers {
		m, err := info(t, s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if m["cluster"] != "natstest" || m["jetstream"] != true {
			t.Errorf("%s: INFO = %v, want a JetStream member of cluster natstest", s.URL(), m)
		}
		names[m["server_name"]] = true
	}
	if len(names) != 3 {
		t.Errorf("server names %v, want 3 distinct", names)
	}
	if got := natstest.URLs(servers); strings.Count(got, ",") != 2 {
		t.Errorf("URLs = %q", got)
	}
}
