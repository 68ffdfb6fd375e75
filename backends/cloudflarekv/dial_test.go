package cloudflarekv

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

// TestDialChecksAccess: Dial opens a namespace the token may read, and
// works through it; a wrong token fails at Dial with the read's error,
// naming the namespace and what to check, a closed port as an
// *UnreachableError that shows no credential, and an empty token before
// anything is sent.
func TestDialChecksAccess(t *testing.T) {
	s, err := Dial(t.Context(), srv.AccountID, srv.NamespaceID, srv.Token, srv.BaseURL())
	if err != nil {
		t.Fatalf("Dial(Miniflare) = %v", err)
	}
	where := "cloudflarekv namespace " + srv.NamespaceID + " of account " + srv.AccountID + " at " + srv.BaseURL()
	if got := s.String(); got != where {
		t.Errorf("String() = %q, want %q", got, where)
	}
	if _, _, err := s.Get(t.Context(), uniquePrefix(t.Name())+"absent"); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("Get through the dialled store = %v, want ErrNotFound", err)
	}
	_ = s.Close()

	_, err = Dial(t.Context(), srv.AccountID, srv.NamespaceID, "wrong-token", srv.BaseURL())
	if oe, ok := errors.AsType[*driver.OpError](err); !ok || oe.Op != "get" || !strings.HasPrefix(err.Error(), "checking access to "+where+" (are the API token, with Workers KV Storage: Edit permission, the account ID and the namespace ID right?)") || strings.Contains(err.Error(), "wrong-token") {
		t.Errorf("Dial(wrong token) = %v, want the read's *driver.OpError after %q and what to check, without the token", err, "checking access to "+where)
	}
	_, err = Dial(t.Context(), srv.AccountID, srv.NamespaceID, "wrong-token", srv.BaseURL(), WithSetting("$TOKEN", "--account", "--namespace"))
	if want := " (are the API token ($TOKEN), with Workers KV Storage: Edit permission, the account ID (--account) and the namespace ID (--namespace) right?)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Dial(wrong token, WithSetting) = %v, want it to say %q", err, want)
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

// TestDialSilentAPI: an API that accepts the connection and never answers
// fails Dial when its context ends, as an *UnreachableError naming the base
// URL without its credentials.
func TestDialSilentAPI(t *testing.T) {
	addr, _ := backendtest.SilentListener(t)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	_, err := Dial(ctx, srv.AccountID, srv.NamespaceID, srv.Token, "http://u:SECRET@"+addr+"/client/v4/", WithLogger(quiet))
	ue, ok := errors.AsType[*driver.UnreachableError](err)
	if !ok || len(ue.Endpoints) != 1 || ue.Endpoints[0] != "http://"+addr+"/client/v4/" || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("Dial(silent API) = %v, want an *UnreachableError at http://%s/client/v4/ without the credential", err, addr)
	}
}

// TestStringWithoutBaseURL: a Store New made (or Dial's without a base
// URL) names its namespace and account alone; it shows no token.
func TestStringWithoutBaseURL(t *testing.T) {
	s, err := New(client(), srv.AccountID, srv.NamespaceID)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, want := s.String(), "cloudflarekv namespace "+srv.NamespaceID+" of account "+srv.AccountID; got != want || strings.Contains(got, srv.Token) {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
