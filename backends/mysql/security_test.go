package mysql_test

import (
	"context"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/mysql"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/fleettest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/mariadbtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/tlstest"
	"github.com/kvbreaker/kvbreaker/tlsdiag"
)

// TestTLS: a MariaDB that refuses TCP without TLS (require_secure_transport),
// reached with tls= naming a registered configuration that trusts the test's
// authority and presents its client certificate, as a user created REQUIRE
// X509 with rights on its own table only: a Store writes, reads and lists,
// and a fleet of Breakers runs a circuit's life. Refused: a plain-text
// connection, a client that trusts another authority (the handshake's
// x509.UnknownAuthorityError, which tlsdiag.Classify names), and the same
// user over TLS without a client certificate.
func TestTLS(t *testing.T) {
	pki := tlstest.MustNew(t, "mysql test CA")
	other := tlstest.MustNew(t, "another CA")
	srv := mariadbtest.MustStartWith(t, mariadbtest.Options{TLS: pki})
	ctx := t.Context()
	for _, c := range []struct {
		name string
		pki  *tlstest.PKI
		cert bool
	}{{"kvbreaker-test-tls", pki, true}, {"kvbreaker-test-nocert", pki, false}, {"kvbreaker-test-other", other, true}} {
		cfg := c.pki.ClientConfig()
		if !c.cert {
			cfg = c.pki.ServerOnlyConfig()
		}
		if err := gomysql.RegisterTLSConfig(c.name, cfg); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { gomysql.DeregisterTLSConfig(c.name) })
	}
	dsn := func(user, tlsName string) string {
		d := user + "@tcp(" + srv.Addr() + ")/" + mariadbtest.Database
		if tlsName != "" {
			d += "?tls=" + tlsName
		}
		return d
	}

	admin := newDB(t, dsn(mariadbtest.User, "kvbreaker-test-tls"))
	const fleetTable = "tls_fleet"
	if err := mysql.CreateTable(ctx, admin, fleetTable); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE USER 'fleet'@'127.0.0.1' REQUIRE X509",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON " + mariadbtest.Database + "." + fleetTable + " TO 'fleet'@'127.0.0.1'",
	} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var cipher string
	if err := admin.QueryRowContext(ctx, "SHOW STATUS LIKE 'Ssl_cipher'").Scan(new(string), &cipher); err != nil || cipher == "" {
		t.Fatalf("the admin's connection has Ssl_cipher %q (%v): it is not TLS", cipher, err)
	}

	prefix := uniquePrefix(t)
	var stores []driver.Store
	for range 4 {
		s, err := mysql.New(newDB(t, dsn("fleet", "kvbreaker-test-tls")), fleetTable, mysql.WithEndpoint(srv.Addr()))
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

	refused := func(what, d string) error {
		t.Helper()
		st, err := mysql.New(newDB(t, d), fleetTable, mysql.WithEndpoint(srv.Addr()))
		if err != nil {
			return err // New may already have asked the server
		}
		defer st.Close()
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_, err = st.CompareAndSwap(cctx, "refused.example", driver.NoVersion, []byte("x"), time.Minute)
		if err == nil {
			t.Fatalf("%s: the write succeeded", what)
		}
		return err
	}

	t.Run("plain text", func(t *testing.T) {
		// The superuser, whom the server admits over TLS (admin above) and
		// no REQUIRE X509 restricts: the refusal is for the transport.
		// MariaDB 10.11 reports it as access denied (1045), not by name.
		err := refused("plain text", dsn(mariadbtest.User, ""))
		if me, ok := errors.AsType[*gomysql.MySQLError](err); !ok || me.Number != 1045 {
			t.Errorf("plain text: %v, want the server's access denied (1045) to a user it admits over TLS", err)
		}
	})
	t.Run("another CA", func(t *testing.T) {
		err := refused("another CA", dsn("fleet", "kvbreaker-test-other"))
		if !errors.As(err, new(x509.UnknownAuthorityError)) {
			t.Fatalf("another CA: %v, want an x509.UnknownAuthorityError", err)
		}
		te, ok := errors.AsType[*tlsdiag.Error](err)
		if !ok || te.Kind != tlsdiag.Untrusted || te.Endpoint != srv.Addr() || !strings.Contains(err.Error(), "RegisterTLSConfig") {
			t.Errorf("another CA: %v, want a *tlsdiag.Error of kind Untrusted at %s that says where the authority goes", err, srv.Addr())
		}
	})
	t.Run("no client certificate", func(t *testing.T) {
		err := refused("no client certificate", dsn("fleet", "kvbreaker-test-nocert"))
		if me, ok := errors.AsType[*gomysql.MySQLError](err); !ok || me.Number != 1045 {
			t.Errorf("no client certificate: %v, want the server's access denied (1045) to a user created REQUIRE X509", err)
		}
	})
}
