package postgres_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestDialMissingTable: Dial's store has the pool WithMaxConns asked for,
// its connections bounded by 2 s when the string sets no connect_timeout;
// its Ping says a missing table in an error matching ErrNoTable that names
// the table, the database and the server and that Explain keeps as it is;
// the store's Prepare creates the table, after which Ping passes (the
// negative control), and a closed store's Ping matches ErrClosed, not
// ErrNoTable.
func TestDialMissingTable(t *testing.T) {
	ctx := t.Context()
	name := fmt.Sprintf("dial_%d", prefixSeq.Add(1))
	s, err := postgres.Dial(ctx, server.URL(), name, postgres.WithMaxConns(2))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t.Cleanup(func() { _, _ = newPool(t, server.URL()).Exec(ctx, "DROP TABLE IF EXISTS "+name+" CASCADE") })
	if cfg := s.Pool().Config(); cfg.MaxConns != 2 || cfg.ConnConfig.ConnectTimeout != 2*time.Second {
		t.Errorf("Dial's pool: MaxConns %d, ConnectTimeout %v; want 2 and 2s", cfg.MaxConns, cfg.ConnConfig.ConnectTimeout)
	}
	err = s.Ping(ctx)
	want := "postgres: table " + name + " does not exist in database " + s.Pool().Config().ConnConfig.Database + " at " + server.Addr() + " (SQLSTATE 42P01)"
	if pe, _ := errors.AsType[*pgconn.PgError](err); !errors.Is(err, postgres.ErrNoTable) || err.Error() != want || pe == nil || pe.Code != "42P01" {
		t.Fatalf("Ping on a missing table: %v; want %q, matching ErrNoTable and unwrapping to the server's 42P01", err, want)
	}
	if got := s.Explain(err); got != err {
		t.Errorf("Explain of the missing table: %v; want it as it is", got)
	}
	if p, err := s.Prepare(ctx); err != nil || p.Existed {
		t.Fatalf("Prepare = %+v, %v; want the table created", p, err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping once the table exists: %v", err)
	}
	s.Close()
	if err := s.Ping(ctx); !errors.Is(err, postgres.ErrClosed) || errors.Is(err, postgres.ErrNoTable) {
		t.Errorf("Ping after Close: %v; want ErrClosed alone", err)
	}
}

// TestDialRefusesWhatItCannotUse: a connection string that does not parse
// is Dial's *driver.OptionError, without its password; a negative
// WithMaxConns is refused.
func TestDialRefusesWhatItCannotUse(t *testing.T) {
	_, err := postgres.Dial(t.Context(), "host=db password=s3cret port=notaport", "kvbreaker")
	if _, ok := errors.AsType[*driver.OptionError](err); !ok || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Dial of a bad string: %v; want an *driver.OptionError without the password", err)
	}
	if _, err := postgres.New(newPool(t, server.URL()), table, postgres.WithMaxConns(-1)); !strings.Contains(fmt.Sprint(err), "WithMaxConns") {
		t.Errorf("WithMaxConns(-1): %v; want it refused", err)
	}
}

// TestExplainLeavesCreateDenied: a *CreateDeniedError already says what to
// change, so Explain puts only the address in front of it; the same
// refusal bare (the negative control) is explained as a missing privilege.
func TestExplainLeavesCreateDenied(t *testing.T) {
	s, err := postgres.New(newPool(t, server.URL()), table)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pe := &pgconn.PgError{Severity: "ERROR", Code: "42501", Message: "permission denied for schema public"}
	de := &postgres.CreateDeniedError{User: "app", Table: "t", Err: pe}
	if got := s.Explain(de); got.Error() != "postgres at "+server.Addr()+": "+de.Error() || !errors.Is(got, de) {
		t.Errorf("Explain of a CreateDeniedError: %v", got)
	}
	if got := s.Explain(pe); !strings.Contains(got.Error(), "lacks a privilege") {
		t.Errorf("Explain of the bare refusal: %v", got)
	}
}

// TestOpenLeavesTheCallersConfig: Open's pool gets the 2 s connection
// bound and WithMaxConns on a copy; the configuration the caller passed
// keeps its own values.
func TestOpenLeavesTheCallersConfig(t *testing.T) {
	cfg, err := postgres.ParseConfig(server.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.ConnectTimeout = 0
	maxConns := cfg.MaxConns
	s, err := postgres.Open(t.Context(), cfg, table, postgres.WithMaxConns(int(maxConns)+1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Pool().Config(); got.MaxConns != maxConns+1 || got.ConnConfig.ConnectTimeout != 2*time.Second {
		t.Errorf("the pool: MaxConns %d, ConnectTimeout %v; want %d and 2s", got.MaxConns, got.ConnConfig.ConnectTimeout, maxConns+1)
	}
	if cfg.MaxConns != maxConns || cfg.ConnConfig.ConnectTimeout != 0 {
		t.Errorf("the caller's configuration became MaxConns %d, ConnectTimeout %v; want %d and 0 as given", cfg.MaxConns, cfg.ConnConfig.ConnectTimeout, maxConns)
	}
}
