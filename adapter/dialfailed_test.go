package adapter_test

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

func dial(t *testing.T, addr string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err == nil {
		c.Close()
		t.Fatalf("dial %s succeeded, want it to fail", addr)
	}
	return err
}

// TestUnreachableRefused: a refused loopback connection is a dial failure,
// "connection refused" in short, and an UnreachableError over it reads as
// every backend's message does, matches ErrUnreachable (also through an
// OpError) and still unwraps to the dial error.
func TestUnreachableRefused(t *testing.T) {
	addr := backendtest.ClosedPort(t)
	err := dial(t, addr)
	got, ok := adapter.DialFailed(err)
	if !ok {
		t.Fatalf("DialFailed(%v) = false, want a refused dial recognised", err)
	}
	if _, isOp := got.(*net.OpError); !isOp {
		t.Errorf("DialFailed returned %T, want the *net.OpError", got)
	}
	if r := adapter.DialReason(err); r != "connection refused" {
		t.Errorf("DialReason = %q, want %q", r, "connection refused")
	}
	ue := &driver.UnreachableError{Backend: "etcd", Endpoints: []string{"http://" + addr}, Reason: adapter.DialReason(got), Err: got}
	if want := "cannot reach etcd at http://" + addr + ": connection refused"; ue.Error() != want {
		t.Errorf("Error() = %q, want %q", ue, want)
	}
	wrapped := error(&driver.OpError{Backend: "etcd", Op: "dial", Err: ue})
	if !errors.Is(wrapped, driver.ErrUnreachable) || !errors.Is(wrapped, syscall.ECONNREFUSED) {
		t.Errorf("%v does not match ErrUnreachable and ECONNREFUSED", wrapped)
	}
	if errors.Is(wrapped, driver.ErrNotFound) || errors.Is(wrapped, driver.ErrConflict) {
		t.Errorf("%v matches another sentinel", wrapped)
	}
	if found, ok := errors.AsType[*driver.UnreachableError](wrapped); !ok || found != ue {
		t.Errorf("errors.AsType found %v, want the UnreachableError", found)
	}
}

// TestUnreachableUnknownHost: a name under .invalid (RFC 6761: never
// resolves) is a dial failure, "no such host <name>" in short.
func TestUnreachableUnknownHost(t *testing.T) {
	err := dial(t, "kvbreaker-test.invalid:2379")
	dns, isDNS := errors.AsType[*net.DNSError](err)
	if !isDNS {
		t.Fatalf("dial of a .invalid name: %v (%T), want a *net.DNSError", err, err)
	}
	if !dns.IsNotFound {
		// No resolver answered (a sandbox without DNS): that is not an
		// answer that the name does not exist, and must not be classified.
		if _, ok := adapter.DialFailed(err); ok {
			t.Errorf("DialFailed(%v) = true for a lookup nobody answered", err)
		}
		t.Skipf("no resolver said the name does not exist: %v", err)
	}
	if got, ok := adapter.DialFailed(err); !ok || got != error(dns) {
		t.Errorf("DialFailed(%v) = %v, %v; want the *net.DNSError", err, got, ok)
	}
	if r, want := adapter.DialReason(err), "no such host kvbreaker-test.invalid"; r != want {
		t.Errorf("DialReason = %q, want %q", r, want)
	}
	ue := &driver.UnreachableError{Backend: "redis", Endpoints: []string{"kvbreaker-test.invalid:2379"}, Reason: adapter.DialReason(err), Err: err}
	if want := "cannot reach redis at kvbreaker-test.invalid:2379: no such host kvbreaker-test.invalid"; ue.Error() != want {
		t.Errorf("Error() = %q, want %q", ue, want)
	}
}

// TestNotDialFailures: errors after which something may have been sent, or
// that say nothing about connecting, are not classified as dial failures.
func TestNotDialFailures(t *testing.T) {
	// A server that accepts and hangs up: the connection was made, the
	// read fails (EOF or a reset), and that is not "unreachable".
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, readErr := c.Read(make([]byte, 1))
	c.Close()
	if readErr == nil {
		t.Fatal("read from a closed connection succeeded")
	}

	for name, err := range map[string]error{
		"nil":                nil,
		"plain":              errors.New("permission denied"),
		"deadline":           context.DeadlineExceeded,
		"read after connect": readErr,
		"EOF":                io.EOF,
		"refused, not dial":  &net.OpError{Op: "read", Net: "udp", Err: syscall.ECONNREFUSED},
		"dial timeout":       &net.OpError{Op: "dial", Net: "tcp", Err: context.DeadlineExceeded},
		"DNS server failure": &net.DNSError{Err: "server misbehaving", Name: "db.example", IsTemporary: true},
	} {
		if got, ok := adapter.DialFailed(err); ok || got != nil {
			t.Errorf("%s: DialFailed(%v) = %v, true; want nil, false", name, err, got)
		}
	}
}

// TestDialReasonUnclassified: an error DialReason does not know is its
// own text.
func TestDialReasonUnclassified(t *testing.T) {
	if r := adapter.DialReason(errors.New("tls: handshake failure")); r != "tls: handshake failure" {
		t.Errorf("DialReason of an unclassified error = %q, want its text", r)
	}
}

// TestDialReasonShort: another failed dial reads as its inner error, not
// the whole "dial tcp …" chain; no error at all is an unknown cause.
func TestDialReasonShort(t *testing.T) {
	op := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("i/o timeout")}
	if r := adapter.DialReason(op); r != "i/o timeout" {
		t.Errorf("DialReason(%v) = %q, want %q", op, r, "i/o timeout")
	}
	if r := adapter.DialReason(nil); r != "unknown cause" {
		t.Errorf("DialReason(nil) = %q, want %q", r, "unknown cause")
	}
}

// TestShownURL: a URL is shown without user information, query or
// fragment; one that does not parse, or names no host, is not shown.
func TestShownURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://user:secret@kv.example:8443/v1?token=secret#frag": "https://kv.example:8443/v1",
		"http://[::1":    "(a URL that does not parse)",
		"db:5432":        "(a URL that does not parse)",
		"secret@db:5432": "(a URL that does not parse)",
	} {
		if got := adapter.ShownURL(raw); got != want {
			t.Errorf("ShownURL(%q) = %q, want %q", raw, got, want)
		}
	}
}
