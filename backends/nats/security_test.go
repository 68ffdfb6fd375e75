package nats_test

import (
	"context"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/kvbreaker/kvbreaker"
	kvnats "github.com/kvbreaker/kvbreaker/backends/nats"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/fleettest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/natstest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/tlstest"
	"github.com/kvbreaker/kvbreaker/tlsdiag"
)

// TestTLS: a NATS server that speaks TLS only and requires a client
// certificate its authority signed, reached at its tls:// URL with
// nats.Secure: Dial's Store writes, reads and lists, and a fleet of
// Breakers runs a circuit's life. Refused by Dial, each without waiting
// for its context: a client that trusts another authority (the
// handshake's x509.UnknownAuthorityError, which tlsdiag.Classify names),
// one without a client certificate, and a nats:// URL without nats.Secure
// (which nats.go upgrades to TLS trusting the system's authorities).
func TestTLS(t *testing.T) {
	pki := tlstest.MustNew(t, "nats test CA")
	other := tlstest.MustNew(t, "another CA")
	srv := natstest.MustStartWith(t, natstest.Options{TLS: pki, ClientCerts: true})
	if !strings.HasPrefix(srv.URL(), "tls://") {
		t.Fatalf("the server's URL %s is not tls://", srv.URL())
	}
	ctx := t.Context()
	const tlsBucket = "kvbreaker_tls"
	prefix := uniquePrefix(t)
	var stores []driver.Store
	for range 3 {
		s, err := kvnats.Dial(ctx, srv.URL(), tlsBucket, []natsgo.Option{natsgo.Secure(pki.ClientConfig())})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		p, err := kvbreaker.Prefixed(s, prefix)
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, p)
	}
	fleettest.EndToEnd(t, stores, "inbox.example")

	// A minute's context against half of it: a refusal is reported when
	// seen, not when the context ends.
	refused := func(t *testing.T, url string, opts ...natsgo.Option) error {
		t.Helper()
		dctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		start := time.Now()
		st, err := kvnats.Dial(dctx, url, tlsBucket, opts)
		if err == nil {
			st.Close()
			t.Fatal("Dial succeeded")
		}
		if d := time.Since(start); d >= 30*time.Second || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Dial failed after %v with %v: it waited for its context, not for the refusal", d, err)
		}
		return err
	}
	t.Run("another CA", func(t *testing.T) {
		err := refused(t, srv.URL(), natsgo.Secure(other.ClientConfig()))
		if !errors.As(err, new(x509.UnknownAuthorityError)) {
			t.Fatalf("Dial: %v, want an x509.UnknownAuthorityError", err)
		}
		if te := tlsdiag.Classify("nats", srv.Addr(), err); te == nil || te.Kind != tlsdiag.Untrusted {
			t.Errorf("Classify(%v) = %v, want a tlsdiag.Error of kind Untrusted", err, te)
		}
	})
	t.Run("no client certificate", func(t *testing.T) {
		// TLS 1.3 sends the refusal after the handshake: read as the
		// alert, or as a broken pipe or reset when the server's close
		// wins; Dial names the refusal either way.
		err := refused(t, srv.URL(), natsgo.Secure(pki.ServerOnlyConfig()))
		te, ok := errors.AsType[*tlsdiag.Error](err)
		if !ok || te.Kind != tlsdiag.ClientCertRefused {
			t.Errorf("Dial without a client certificate = %v; want a tlsdiag.Error of kind ClientCertRefused", err)
		}
	})
	t.Run("system CAs", func(t *testing.T) {
		// nats.go upgrades a nats:// connection to the TLS the server's
		// INFO requires, trusting the system's authorities: it is never
		// plain text.
		err := refused(t, "nats://"+srv.Addr())
		if !errors.As(err, new(x509.UnknownAuthorityError)) {
			t.Errorf("Dial: %v, want an x509.UnknownAuthorityError", err)
		}
	})
}
