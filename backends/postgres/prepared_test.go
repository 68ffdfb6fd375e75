package postgres_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/internal/testservers/pgtest"
)

// TestPreparedSaysWhatItDid: Prepared's words name what Prepare made the
// first time (the table's sequence, index and trigger as the server has
// them), that it found the table the second time and that it added the
// trigger a table lacked.
func TestPreparedSaysWhatItDid(t *testing.T) {
	pool := newPool(t, server.URL())
	ctx := t.Context()
	name := fmt.Sprintf("said_%d", prefixSeq.Add(1))
	t.Cleanup(func() {
		_, _ = pool.Exec(ctx, "DROP TABLE IF EXISTS "+name+" CASCADE; DROP SEQUENCE IF EXISTS "+name+"_version")
	})
	p, err := postgres.Prepare(ctx, pool, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, object := range []string{"sequence " + name + "_version", "index " + name + "_purge_at", "trigger " + name + "_notify"} {
		kind, obj, _ := strings.Cut(object, " ")
		var n int
		q := map[string]string{
			"sequence": "SELECT count(*) FROM pg_class WHERE relkind = 'S' AND relname = $1",
			"index":    "SELECT count(*) FROM pg_class WHERE relkind = 'i' AND relname = $1",
			"trigger":  "SELECT count(*) FROM pg_trigger WHERE tgname = $1",
		}[kind]
		if err := pool.QueryRow(ctx, q, obj).Scan(&n); err != nil || n != 1 || !strings.Contains(p.String(), object) {
			t.Errorf("Prepared says %q; the server has %d %s (%v)", p, n, object, err)
		}
	}
	if p, err := postgres.Prepare(ctx, pool, name); err != nil || p.String() != "exists already; nothing changed (the store reads it)" {
		t.Errorf("second Prepare: %q, %v", p, err)
	}
	if _, err := pool.Exec(ctx, "DROP TRIGGER "+name+"_notify ON "+name); err != nil {
		t.Fatal(err)
	}
	if p, err := postgres.Prepare(ctx, pool, name); err != nil || !strings.HasPrefix(p.String(), "exists already; added trigger "+name+"_notify") {
		t.Errorf("Prepare without the trigger: %q, %v", p, err)
	}
}

// TestPrepareCreateDenied: a role that may not create in the schema gets a
// *CreateDeniedError that names it, the table and the grants, and unwraps
// to the server's refusal; an error that is not a refusal stays as it is.
func TestPrepareCreateDenied(t *testing.T) {
	admin := newPool(t, server.URL())
	ctx := t.Context()
	role := fmt.Sprintf("nocreate_%d", prefixSeq.Add(1))
	for _, q := range []string{"CREATE ROLE " + role + " LOGIN", "REVOKE CREATE ON SCHEMA public FROM PUBLIC"} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	roleURL := strings.Replace(server.URL(), "postgres://"+pgtest.User+"@", "postgres://"+role+"@", 1)
	_, err := postgres.Prepare(ctx, newPool(t, roleURL), "denied")
	de, ok := errors.AsType[*postgres.CreateDeniedError](err)
	pe, _ := errors.AsType[*pgconn.PgError](err)
	if !ok || de.User != role || pe == nil || pe.Code != "42501" ||
		!strings.Contains(err.Error(), `user "`+role+`" may not create table denied`) ||
		!strings.Contains(err.Error(), "grant the user SELECT, INSERT, UPDATE, DELETE on it and USAGE on its sequence") {
		t.Fatalf("Prepare as a role without CREATE: %v; want a *CreateDeniedError naming the role and the grants", err)
	}
	de.Script = "what a tool prints"
	if !strings.Contains(de.Error(), "owner run what a tool prints, and grant") {
		t.Errorf("with Script set: %v", de)
	}
	// The store's Prepare names WithCreateScript's script.
	s, err := postgres.Dial(ctx, roleURL, "denied", postgres.WithCreateScript("what a tool prints"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Prepare(ctx); !strings.Contains(fmt.Sprint(err), "owner run what a tool prints, and grant") {
		t.Errorf("Store.Prepare WithCreateScript: %v", err)
	}
	// Negative control: a refusal of another kind is no CreateDeniedError.
	if _, err := postgres.Prepare(ctx, admin, "bad name"); errors.As(err, new(*postgres.CreateDeniedError)) || err == nil {
		t.Errorf("Prepare of a bad name: %v; want its own error", err)
	}
}
