package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/fleettest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/pgtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/tlstest"
	"github.com/kvbreaker/kvbreaker/tlsdiag"
)

// grants are what a role needs on a store's table: the least a database
// owner gives it.
const grants = `GRANT SELECT, INSERT, UPDATE, DELETE ON fleet_a TO fleet_a;
GRANT USAGE ON SEQUENCE fleet_a_version TO fleet_a`

// TestVerifyFullAndLimitedRole: a PostgreSQL that refuses TCP without TLS,
// reached with sslmode=verify-full against the test's authority, by a role
// with rights on its own table only (grants): a fleet of Breakers runs a
// circuit's life and Follow delivers a change and Synced. The same role is
// refused another table with a *postgres.PrivilegeError naming the
// GRANTs; a client that trusts another authority gets a *tlsdiag.Error
// naming sslrootcert.
func TestVerifyFullAndLimitedRole(t *testing.T) {
	pki := tlstest.MustNew(t, "postgres test CA")
	srv := pgtest.MustStartWith(t, pgtest.Options{TLS: pki})
	ctx := t.Context()
	admin := newPool(t, srv.URL())
	for _, table := range []string{"fleet_a", "fleet_b"} {
		if err := postgres.CreateTable(ctx, admin, table); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range append([]string{"CREATE ROLE fleet_a LOGIN"}, strings.Split(grants, ";\n")...) {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	roleURL := strings.Replace(srv.URL(), "postgres://"+pgtest.User+"@", "postgres://fleet_a@", 1)
	if !strings.Contains(roleURL, "sslmode=verify-full") {
		t.Fatalf("the server's URL %s does not verify", roleURL)
	}

	prefix := uniquePrefix(t)
	var stores []driver.Store
	for range 4 {
		s, err := postgres.New(newPool(t, roleURL), "fleet_a")
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
	f := fleettest.New(t, stores, kvbreaker.Settings{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: 10 * time.Minute})
	f.Cycle(t, "inbox.example", 16)

	s, err := postgres.New(newPool(t, roleURL), "fleet_a")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	got := make(chan driver.Change, 16)
	done := make(chan error, 1)
	go func() {
		done <- s.Follow(fctx, prefix+"follow/", 200*time.Millisecond, func(c driver.Change) {
			if c.Kind == driver.ChangeStale || c.Kind == driver.ChangeSynced {
				select {
				case got <- c:
				default:
				}
			}
		})
	}()
	// The key is written once, at the first Synced; under load more
	// heartbeats may come before its Stale.
	for put, written := false, false; !put; {
		select {
		case c := <-got:
			if c.Kind == driver.ChangeSynced && !written {
				if _, err := s.CompareAndSwap(fctx, prefix+"follow/k", 0, []byte("v"), time.Minute); err != nil {
					t.Fatal(err)
				}
				written = true
			}
			put = c.Kind == driver.ChangeStale && c.Key == prefix+"follow/k"
		case <-fctx.Done():
			t.Fatal("Follow over TLS delivered no change")
		}
	}
	cancel()
	<-done

	other, err := postgres.New(newPool(t, roleURL), "fleet_b")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, err = other.CompareAndSwap(ctx, "x", 0, []byte("v"), time.Minute)
	pe, ok := errors.AsType[*postgres.PrivilegeError](err)
	if !ok || pe.Role != "fleet_a" || pe.Table != "fleet_b" ||
		!strings.Contains(err.Error(), `GRANT SELECT, INSERT, UPDATE, DELETE ON "fleet_b" TO "fleet_a" and GRANT USAGE ON SEQUENCE "fleet_b_version"`) {
		t.Errorf("a write to another table: %v, want a PrivilegeError naming the GRANTs", err)
	}
	if _, ok := errors.AsType[*pgconn.PgError](err); !ok {
		t.Errorf("the PrivilegeError does not unwrap to the server's *pgconn.PgError: %v", err)
	}
	if _, _, err := other.Get(ctx, "x"); !errors.As(err, new(*postgres.PrivilegeError)) {
		t.Errorf("a read of another table: %v, want a PrivilegeError", err)
	}

	wrong := tlstest.MustNew(t, "another CA")
	u, err := url.Parse(roleURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("sslrootcert", wrong.CAFile)
	u.RawQuery = q.Encode()
	ws, err := postgres.New(newPool(t, u.String()), "fleet_a", postgres.WithSetting("$DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	err = ws.Ping(ctx)
	te, ok := errors.AsType[*tlsdiag.Error](err)
	if !ok || te.Kind != tlsdiag.Untrusted || !strings.Contains(err.Error(), `("postgres test CA"): give the authority that signed it as sslrootcert= in the connection string`) {
		t.Errorf("trusting another CA: %v, want a *tlsdiag.Error naming sslrootcert", err)
	}
	// Explain names where the caller's connection string came from.
	explained := ws.Explain(err)
	if te, ok := errors.AsType[*tlsdiag.Error](explained); !ok || te.Kind != tlsdiag.Untrusted || !strings.Contains(explained.Error(), "sslrootcert= in $DATABASE_URL (") {
		t.Errorf("Explain of trusting another CA: %v, want a *tlsdiag.Error naming sslrootcert= in $DATABASE_URL", explained)
	}
	plain := strings.Replace(roleURL, "sslmode=verify-full", "sslmode=disable", 1)
	ps, err := postgres.New(newPool(t, plain), "fleet_a")
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	if err := ps.Ping(ctx); err == nil || !strings.Contains(err.Error(), "no encryption") {
		t.Errorf("without TLS: %v, want the server's refusal (pg_hba.conf hostnossl reject)", err)
	}
}
