package tlsdiag_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/testservers/tlstest"
	"github.com/kvbreaker/kvbreaker/tlsdiag"
)

// serve accepts on 127.0.0.1 and hands each connection to handle, until
// the test ends.
func serve(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); handle(c) }()
		}
	}()
	return l.Addr().String()
}

// TestProbe: Probe names each mismatch against a real handshake (a
// TLS server requiring client certificates, a plain-text server) and finds
// none where the client's configuration fits.
func TestProbe(t *testing.T) {
	pki := tlstest.MustNew(t, "probe CA")
	other := tlstest.MustNew(t, "other CA")
	pair, err := tls.LoadX509KeyPair(pki.ServerCertFile, pki.ServerKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	srvCfg := &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pki.ClientConfig().RootCAs, ClientAuth: tls.RequireAndVerifyClientCert}
	tlsAddr := serve(t, func(c net.Conn) {
		tc := tls.Server(c, srvCfg)
		_ = tc.Handshake()
		_, _ = tc.Read(make([]byte, 1))
	})
	plainAddr := serve(t, func(c net.Conn) {
		_, _ = c.Write([]byte("-ERR plain text\r\n"))
		_, _ = c.Read(make([]byte, 1))
	})
	wrongName := pki.ClientConfig()
	wrongName.ServerName = "db.example"
	for _, tc := range []struct {
		name string
		addr string
		cfg  *tls.Config
		want tlsdiag.Problem // 0: none
	}{
		{"fits", tlsAddr, pki.ClientConfig(), 0},
		{"another CA", tlsAddr, other.ClientConfig(), tlsdiag.Untrusted},
		{"wrong name", tlsAddr, wrongName, tlsdiag.WrongName},
		{"no client certificate", tlsAddr, pki.ServerOnlyConfig(), tlsdiag.ClientCertRefused},
		{"plain client", tlsAddr, nil, tlsdiag.ServerSpeaksTLS},
		{"plain server", plainAddr, pki.ClientConfig(), tlsdiag.ServerPlain},
		{"plain both", plainAddr, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			te := tlsdiag.Probe(ctx, "test", tc.addr, tc.addr, tc.cfg)
			var got tlsdiag.Problem
			if te != nil {
				got = te.Kind
				if te.Reason == "" || te.Fix == "" || te.Err == nil && tc.want != tlsdiag.ServerSpeaksTLS {
					t.Errorf("incomplete: %#v", te)
				}
			}
			if got != tc.want {
				t.Errorf("Probe = %v (kind %d), want kind %d", te, got, tc.want)
			}
		})
	}
	if tlsdiag.Classify("test", "x", context.Canceled) != nil || tlsdiag.Classify("test", "x", nil) != nil {
		t.Error("Classify classified an error that is not a TLS failure")
	}
}

// TestCertWatch: a server that asks for a client certificate and, given
// none, resets the connection without an alert (what a client that has
// sent its first request sees of a TLS 1.3 server's refusal when the reset
// overtakes the alert) is named as requiring one; the same reset from a
// server that did not ask, or after the client gave one, is not.
func TestCertWatch(t *testing.T) {
	pki := tlstest.MustNew(t, "watch CA")
	pair, err := tls.LoadX509KeyPair(pki.ServerCertFile, pki.ServerKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	resetter := func(auth tls.ClientAuthType) string {
		cfg := &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: auth, MinVersion: tls.VersionTLS13}
		return serve(t, func(c net.Conn) {
			tc := tls.Server(c, cfg)
			if tc.Handshake() != nil {
				return
			}
			// Read the request, then reset: no alert, whatever was sent.
			_, _ = tc.Read(make([]byte, 1))
			_ = c.(*net.TCPConn).SetLinger(0)
		})
	}
	asks, asksNot := resetter(tls.RequestClientCert), resetter(tls.NoClientCert)
	request := func(addr string, cfg *tls.Config) error {
		c, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Minute))
		_, err = c.Read(make([]byte, 1))
		return err
	}
	for _, tc := range []struct {
		name string
		addr string
		cfg  *tls.Config
		want bool
	}{
		{"asked, none given", asks, pki.ServerOnlyConfig(), true},
		{"asked, one given", asks, pki.ClientConfig(), false},
		{"not asked", asksNot, pki.ServerOnlyConfig(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, w := tlsdiag.WatchClientCert(tc.cfg)
			err := request(tc.addr, cfg)
			if err == nil {
				t.Fatal("the request succeeded; want the server's reset")
			}
			if te := tlsdiag.Classify("test", tc.addr, err); te != nil {
				t.Fatalf("Classify named the reset %v; the control is then no reset", te)
			}
			te := w.Refused("test", tc.addr, err)
			if got := te != nil && te.Kind == tlsdiag.ClientCertRefused; got != tc.want {
				t.Fatalf("Refused(%v) = %v; want a refused certificate: %v", err, te, tc.want)
			}
			if te != nil && (!strings.Contains(te.Error(), "requires a client certificate") || !errors.Is(te, err)) {
				t.Errorf("Refused = %v; want it to say a client certificate is required, unwrapping to %v", te, err)
			}
		})
	}
	var none *tlsdiag.CertWatch
	if none.Refused("test", "x", syscall.ECONNRESET) != nil {
		t.Error("a nil watch named a reset")
	}
}
