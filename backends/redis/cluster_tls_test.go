package redis_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/fleettest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/tlstest"
	"github.com/kvbreaker/kvbreaker/tlsdiag"
)

// TestClusterTLS: a three-master Redis Cluster that speaks TLS only (its
// bus too) and requires client certificates its authority signed, reached
// by a ClusterClient with that TLS configuration: a Store writes, reads and
// lists, and a fleet of Breakers runs a circuit's life on every master.
// Refused, each when seen rather than when the call's context ends: a
// client that trusts another authority (the handshake's
// x509.UnknownAuthorityError, which tlsdiag.Classify names), one without
// a client certificate, and one without TLS.
func TestClusterTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-master cluster")
	}
	pki := tlstest.MustNew(t, "redis cluster test CA")
	other := tlstest.MustNew(t, "another CA")
	c := redistest.MustStartClusterWith(t, 3, redistest.Options{TLS: pki, ClientCerts: true})
	ctx := t.Context()
	newCC := func(cfg *tls.Config) *goredis.ClusterClient {
		cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true, TLSConfig: cfg})
		t.Cleanup(func() { _ = cc.Close() })
		return cc
	}
	cc := newCC(pki.ClientConfig())
	prefix := uniquePrefix(t)
	hosts := hostsOnMasters(t, cc, prefix)

	var stores []driver.Store
	for range 4 {
		s, err := redis.New(newCC(pki.ClientConfig()))
		if err != nil {
			t.Fatal(err)
		}
		p, err := kvbreaker.Prefixed(s, prefix)
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, p)
	}
	fleettest.EndToEnd(t, stores, hosts...)

	// A minute's context against half of it: a refusal is reported when
	// seen, not when the context ends.
	refused := func(t *testing.T, cfg *tls.Config) error {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		start := time.Now()
		st, err := redis.New(newCC(cfg))
		if err == nil {
			_, _, err = st.Get(cctx, prefix+"a.example")
		}
		if err == nil {
			t.Fatal("the read succeeded")
		}
		if d := time.Since(start); d >= 30*time.Second || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("failed after %v with %v: it waited for its context, not for the refusal", d, err)
		}
		return err
	}
	t.Run("another CA", func(t *testing.T) {
		err := refused(t, other.ClientConfig())
		if !errors.As(err, new(x509.UnknownAuthorityError)) {
			t.Fatalf("Get: %v, want an x509.UnknownAuthorityError", err)
		}
		if te := tlsdiag.Classify("redis", c.Addrs()[0], err); te == nil || te.Kind != tlsdiag.Untrusted {
			t.Errorf("Classify(%v) = %v, want a tlsdiag.Error of kind Untrusted", err, te)
		}
	})
	t.Run("no client certificate", func(t *testing.T) {
		// TLS 1.3 sends the refusal after the handshake: read as the
		// alert, or as a reset when the server's close wins; either way
		// the call fails.
		err := refused(t, pki.ServerOnlyConfig())
		t.Logf("Get: %v (Classify: %v)", err, tlsdiag.Classify("redis", c.Addrs()[0], err))
	})
	t.Run("plain text", func(t *testing.T) {
		err := refused(t, nil)
		t.Logf("Get: %v", err)
	})
}
