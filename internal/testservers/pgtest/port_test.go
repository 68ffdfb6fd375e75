package pgtest

import (
	"net"
	"testing"
)

// TestStartOnATakenPort: a port another process takes between its pick
// and the server's bind fails that start, not the test: a primary and a
// standby each start on the next port picked.
func TestStartOnATakenPort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	picks := 0
	pickPort = func() (int, error) {
		if picks++; picks == 1 {
			return taken, nil
		}
		return freePort()
	}
	t.Cleanup(func() { pickPort = freePort })

	p := MustStart(t)
	if p.port == taken || picks != 2 {
		t.Errorf("primary on port %d after %d picks; want a port other than the taken %d, on the second pick", p.port, picks, taken)
	}
	picks = 0
	s := MustStartStandby(t, p)
	if s.port == taken || picks != 2 {
		t.Errorf("standby on port %d after %d picks; want a port other than the taken %d, on the second pick", s.port, picks, taken)
	}
}
