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

// TestDialContext: a context without a deadline gets one timeout away; a
// caller's deadline stands, longer or shorter than the timeout (the
// control: context.WithTimeout alone would shorten the longer one); the
// caller's cancellation still reaches the result.
func TestDialContext(t *testing.T) {
	before := time.Now()
	ctx, cancel := DialContext(context.Background(), time.Minute)
	dl, ok := ctx.Deadline()
	cancel()
	if !ok || dl.Before(before.Add(time.Minute)) || dl.After(time.Now().Add(time.Minute)) {
		t.Errorf("no deadline: got %v (%v), want a minute from the call", dl, ok)
	}
	if ctx.Err() == nil {
		t.Error("cancel did not end the bounded context")
	}
	for _, d := range []time.Duration{time.Second, time.Hour} {
		want := time.Now().Add(d)
		parent, pcancel := context.WithDeadline(context.Background(), want)
		ctx, cancel := DialContext(parent, time.Minute)
		if got, ok := ctx.Deadline(); !ok || !got.Equal(want) {
			t.Errorf("caller's deadline %v away: got %v (%v), want the caller's", d, got, ok)
		}
		cancel()
		if ctx.Err() != nil {
			t.Errorf("caller's deadline %v away: DialContext's cancel ended the caller's context", d)
		}
		pcancel()
		if ctx.Err() == nil {
			t.Errorf("caller's deadline %v away: the caller's cancel did not reach the result", d)
		}
	}
}

// TestCheckHTTPURL: an http:// or https:// URL with a host passes; another
// scheme, no host or no URL at all does not.
func TestCheckHTTPURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"http://127.0.0.1:8000":          true,
		"https://api.example/client/v4/": true,
		"ftp://127.0.0.1":                false,
		"127.0.0.1:2379":                 false,
		"http://":                        false,
		"http://a b":                     false,
		"":                               false,
	} {
		if err := CheckHTTPURL(raw); (err == nil) != ok {
			t.Errorf("CheckHTTPURL(%q) = %v; want ok %v", raw, err, ok)
		}
	}
}
