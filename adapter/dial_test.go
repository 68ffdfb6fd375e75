package adapter

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// TestCheckDialSaysWhy: a listening port passes; a closed port, a missing
// unix socket and a name that cannot resolve are each an
// *driver.UnreachableError matching driver.ErrUnreachable, naming the
// backend and the address, with the cause in a few words.
func TestCheckDialSaysWhy(t *testing.T) {
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	open := ln.Addr().String()
	if err := CheckDial(ctx, "x", "tcp", open, time.Second); err != nil {
		t.Fatalf("CheckDial of a listening port: %v", err)
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	shut := closed.Addr().String()
	closed.Close()
	ln.Close()
	for _, c := range []struct{ network, addr, want string }{
		{"tcp", shut, "cannot reach x at " + shut + ": connection refused"},
		{"unix", filepath.Join(t.TempDir(), "none.sock"), ": no such socket"},
		{"tcp", "no-such-host.invalid:1", ": no such host no-such-host.invalid"},
	} {
		err := CheckDial(ctx, "x", c.network, c.addr, time.Second)
		ue, ok := errors.AsType[*driver.UnreachableError](err)
		if !ok || !errors.Is(err, driver.ErrUnreachable) || ue.Endpoints[0] != c.addr {
			t.Errorf("CheckDial(%s %s) = %v, want an *UnreachableError at it", c.network, c.addr, err)
			continue
		}
		if msg := err.Error(); len(msg) < len(c.want) || msg[len(msg)-len(c.want):] != c.want {
			t.Errorf("CheckDial(%s %s) says %q, want it to end %q", c.network, c.addr, msg, c.want)
		}
	}
}

// TestCheckDialURLShowsNoCredential: a listening http:// URL passes; a
// closed one is an *driver.UnreachableError naming the URL without its
// user information or query, and a URL of another scheme is refused.
func TestCheckDialURLShowsNoCredential(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	open := ln.Addr().String()
	if err := CheckDialURL(t.Context(), "x", "http://u:pw@"+open+"/base/?token=pw", time.Second); err != nil {
		t.Fatalf("CheckDialURL of a listening port: %v", err)
	}
	ln.Close()
	err = CheckDialURL(t.Context(), "x", "http://u:pw@"+open+"/base/?token=pw", time.Second)
	ue, ok := errors.AsType[*driver.UnreachableError](err)
	if !ok || ue.Endpoints[0] != "http://"+open+"/base/" || strings.Contains(err.Error(), "pw") {
		t.Errorf("CheckDialURL of a closed port = %v, want an *UnreachableError at http://%s/base/ without the credentials", err, open)
	}
	if err := CheckDialURL(t.Context(), "x", "ftp://"+open, time.Second); err == nil || errors.Is(err, driver.ErrUnreachable) {
		t.Errorf("CheckDialURL(ftp://) = %v, want a refusal of the scheme", err)
	}
}
