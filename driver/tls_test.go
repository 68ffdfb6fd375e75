package driver_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/testservers/tlstest"
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

// TestProbeTLS: ProbeTLS names each mismatch against a real handshake (a
// TLS server requiring client certificates, a plain-text server) and finds
// none where the client's configuration fits.
func TestProbeTLS(t *testing.T) {
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
		want driver.TLSProblem // 0: none
	}{
		{"fits", tlsAddr, pki.ClientConfig(), 0},
		{"another CA", tlsAddr, other.ClientConfig(), driver.TLSUntrusted},
		{"wrong name", tlsAddr, wrongName, driver.TLSWrongName},
		{"no client certificate", tlsAddr, pki.ServerOnlyConfig(), driver.TLSClientCertRefused},
		{"plain client", tlsAddr, nil, driver.TLSServerSpeaksTLS},
		{"plain server", plainAddr, pki.ClientConfig(), driver.TLSServerPlain},
		{"plain both", plainAddr, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			te := driver.ProbeTLS(ctx, "test", tc.addr, tc.addr, tc.cfg)
			var got driver.TLSProblem
			if te != nil {
				got = te.Kind
				if te.Reason == "" || te.Fix == "" || te.Err == nil && tc.want != driver.TLSServerSpeaksTLS {
					t.Errorf("incomplete: %#v", te)
				}
			}
			if got != tc.want {
				t.Errorf("ProbeTLS = %v (kind %d), want kind %d", te, got, tc.want)
			}
		})
	}
	if driver.ClassifyTLS("test", "x", context.Canceled) != nil || driver.ClassifyTLS("test", "x", nil) != nil {
		t.Error("ClassifyTLS classified an error that is not a TLS failure")
	}
}
