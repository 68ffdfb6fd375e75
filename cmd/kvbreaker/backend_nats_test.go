package main

import (
	"strings"
	"testing"

	kvnats "github.com/kvbreaker/kvbreaker/backends/nats"
	"github.com/kvbreaker/kvbreaker/internal/testservers/natstest"
)

// TestNATSBackend: list, inspect, reset and check with --backend nats
// against a real server this test starts, the URL from the flag or from
// $KVBREAKER_NATS_URL; a refused port is reported as such within 2 s.
func TestNATSBackend(t *testing.T) {
	srv := natstest.MustStart(t)
	st, err := kvnats.Dial(t.Context(), srv.URL(), "cli", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	backendScenario{
		backend: "nats",
		store:   st,
		flags:   []string{"--nats-url", srv.URL(), "--nats-bucket", "cli"},
		env:     map[string]string{"KVBREAKER_NATS_URL": srv.URL(), "KVBREAKER_NATS_BUCKET": "cli"},
		dead:    func(addr string) []string { return []string{"--nats-url", "nats://" + addr} },
	}.run(t)
	code, _, errOut := runT(t, "inspect", "--backend", "nats", "--nats-url", "http://x", "x.example")
	if code == exitOK || !strings.Contains(errOut, "want nats://host:4222") {
		t.Errorf("inspect with an http URL: exit %d, stderr %q", code, errOut)
	}
}
