package nats_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	kvnats "github.com/kvbreaker/kvbreaker/backends/nats"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/natstest"
)

// TestDialRefusedSaysWhy: Dial to servers that refuse the connection (a
// server of ours stopped, and a bare host:port where nothing listens)
// fails within 2 s saying of each that the connection was refused, host
// and port as nats.go names them, where nats.go says only "no servers
// available for connection"; a password in a URL shows nowhere. With one
// of them a live server, Dial connects: the check explains a failure, it
// does not refuse a fleet with one server down.
func TestDialRefusedSaysWhy(t *testing.T) {
	stopped := natstest.MustStart(t)
	stopped.Close()
	closed := backendtest.ClosedPort(t)
	start := time.Now()
	_, err := kvnats.Dial(t.Context(), "nats://app:dial-secret@"+stopped.Addr()+","+closed, "kv", nil)
	took := time.Since(start)
	if !errors.Is(err, driver.ErrUnreachable) {
		t.Fatalf("err = %v, want one matching driver.ErrUnreachable", err)
	}
	for _, addr := range []string{stopped.Addr(), closed} {
		if want := "cannot reach nats at " + addr + ": connection refused"; !strings.Contains(err.Error(), want) {
			t.Errorf("err = %q, want it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "dial-secret") {
		t.Errorf("err = %q shows the URL's password", err)
	}
	if took > 2*time.Second {
		t.Errorf("took %v, want a refusal reported within 2 s", took)
	}

	s, err := kvnats.Dial(t.Context(), "nats://"+closed+","+server.URL(), "kv", nil)
	if err != nil {
		t.Fatalf("Dial with one server refusing and one live: %v", err)
	}
	s.Close()
}

// TestStoreString: a Store names its bucket and the server it reached,
// without the URL's user information; with a refused URL first in the
// list, the live server's.
func TestStoreString(t *testing.T) {
	url := strings.Replace(server.URL(), "://", "://app:string-secret@", 1)
	s, err := kvnats.Dial(t.Context(), "nats://"+backendtest.ClosedPort(t)+","+url, bucket, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, want := s.String(), "nats bucket "+bucket+" at "+server.URL(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
