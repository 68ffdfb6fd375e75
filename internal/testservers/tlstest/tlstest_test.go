package tlstest_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"testing"

	"github.com/kvbreaker/kvbreaker/internal/testservers/tlstest"
)

// TestHandshake: a server with the PKI's certificate, requiring a client
// certificate the same authority signed, accepts the PKI's client; a
// client that trusts another authority fails to verify the server with
// x509.UnknownAuthorityError, and a client without a certificate is
// refused. The key files are readable by their owner only.
func TestHandshake(t *testing.T) {
	p := tlstest.MustNew(t, "test CA")
	other := tlstest.MustNew(t, "other CA")
	pair, err := tls.LoadX509KeyPair(p.ServerCertFile, p.ServerKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(p.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	clients := x509.NewCertPool()
	clients.AppendCertsFromPEM(caPEM)
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: clients, ClientAuth: tls.RequireAndVerifyClientCert})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = c.(*tls.Conn).Handshake()
				_, _ = c.Write([]byte("x"))
				c.Close()
			}()
		}
	}()
	dial := func(cfg *tls.Config) error {
		c, err := tls.Dial("tcp", l.Addr().String(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		// TLS 1.3 reports the server's refusal of the client certificate
		// on the first read.
		_, err = c.Read(make([]byte, 1))
		return err
	}
	if err := dial(p.ClientConfig()); err != nil {
		t.Errorf("the PKI's own client: %v", err)
	}
	var ua x509.UnknownAuthorityError
	if err := dial(other.ClientConfig()); !errors.As(err, &ua) {
		t.Errorf("a client trusting another CA: %v, want x509.UnknownAuthorityError", err)
	}
	if err := dial(p.ServerOnlyConfig()); err == nil {
		t.Error("a client without a certificate was accepted")
	}
	for _, f := range []string{p.ServerKeyFile, p.ClientKeyFile} {
		if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", f, st.Mode(), err)
		}
	}
}
