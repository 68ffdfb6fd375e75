package cloudflarekv

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker/driver"
)

// TestDialChecksAccess: Dial opens a namespace the token may read, and
// works through it; a wrong token fails at Dial with the read's error, a
// closed port as an *UnreachableError that shows no credential, and an
// empty token before anything is sent.
func TestDialChecksAccess(t *testing.T) {
	s, err := Dial(t.Context(), srv.AccountID, srv.NamespaceID, srv.Token, srv.BaseURL())
	if err != nil {
		t.Fatalf("Dial(Miniflare) = %v", err)
	}
	if _, _, err := s.Get(t.Context(), uniquePrefix(t.Name())+"absent"); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("Get through the dialled store = %v, want ErrNotFound", err)
	}
	_ = s.Close()

	_, err = Dial(t.Context(), srv.AccountID, srv.NamespaceID, "wrong-token", srv.BaseURL())
	if oe, ok := errors.AsType[*driver.OpError](err); !ok || oe.Op != "get" {
		t.Errorf("Dial(wrong token) = %v, want the read's *driver.OpError", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	_, err = Dial(t.Context(), srv.AccountID, srv.NamespaceID, srv.Token, "http://u:SECRET@"+l.Addr().String()+"/client/v4/")
	if !errors.Is(err, driver.ErrUnreachable) || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("Dial(closed port) = %v, want an *UnreachableError without the credential", err)
	}

	if _, err := Dial(t.Context(), srv.AccountID, srv.NamespaceID, "", srv.BaseURL()); !errors.As(err, new(*driver.OptionError)) {
		t.Errorf("Dial(no token) = %v, want a *driver.OptionError", err)
	}
}
