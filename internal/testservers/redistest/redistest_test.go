package redistest

import (
	"net"
	"testing"
	"time"
)

// TestStartKillRestart: the server listens, Kill ends it (the port
// refuses), Restart brings it back on the same port.
func TestStartKillRestart(t *testing.T) {
	s := MustStart(t)
	dial := func() error {
		c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(); err != nil {
		t.Fatalf("started server on %s: %v", s.Addr(), err)
	}
	pid := s.PID()
	s.Kill()
	if err := dial(); err == nil {
		t.Fatalf("killed server (pid %d) still accepts on %s", pid, s.Addr())
	}
	if err := s.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := dial(); err != nil || s.PID() == pid {
		t.Fatalf("restarted server: %v, pid %d (was %d)", err, s.PID(), pid)
	}
}

func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers")
	}
	c := MustStartCluster(t, 3)
	if len(c.Addrs()) != 3 {
		t.Fatalf("addrs %v", c.Addrs())
	}
}
