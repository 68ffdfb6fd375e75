package mariadbtest_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/testservers/mariadbtest"
)

// TestStartKillRestart: the server accepts connections on 127.0.0.1, a
// killed one refuses them, and a restarted one accepts them again on the
// same port.
func TestStartKillRestart(t *testing.T) {
	s := mariadbtest.MustStart(t)
	dial := func() error {
		c, err := net.DialTimeout("tcp", s.Addr(), 2*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(); err != nil {
		t.Fatalf("dial %s: %v", s.Addr(), err)
	}
	pid := s.PID()
	s.Kill()
	if err := dial(); err == nil {
		t.Fatalf("%s still accepts after Kill of pid %d", s.Addr(), pid)
	}
	if err := s.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := dial(); err != nil {
		t.Fatalf("dial after Restart: %v", err)
	}
	if s.PID() == pid {
		t.Errorf("Restart kept pid %d", pid)
	}
	if v := s.Version(); !strings.Contains(v, "MariaDB") {
		t.Errorf("Version() = %q, want MariaDB's", v)
	}
}
