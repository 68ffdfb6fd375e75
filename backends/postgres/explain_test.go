package postgres

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestExplainNamesTheSettingAndKeepsTheError: each refusal a server gives
// is explained with the setting the caller named (or "the connection
// string"), never shows the password, and still unwraps to the server's
// *pgconn.PgError; an error that is not the server's is only prefixed.
func TestExplainNamesTheSettingAndKeepsTheError(t *testing.T) {
	cfg, err := pgxpool.ParseConfig("postgres://app:s3cret@db.invalid:5432/appdb")
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range []string{"28P01", "28000", "3D000", "42501", "XX000"} {
		pe := &pgconn.PgError{Severity: "FATAL", Code: code, Message: "refused"}
		for _, setting := range []string{"$DATABASE_URL", ""} {
			got := Explain(pe, "db.invalid:5432", cfg, "breakers", setting)
			msg := got.Error()
			if !strings.HasPrefix(msg, "postgres at db.invalid:5432") || !strings.Contains(msg, code) || strings.Contains(msg, "s3cret") {
				t.Errorf("%s, setting %q: %q", code, setting, msg)
			}
			if _, ok := errors.AsType[*pgconn.PgError](got); !ok {
				t.Errorf("%s: %q does not unwrap to the *pgconn.PgError", code, msg)
			}
			named := setting
			if named == "" {
				named = "the connection string"
			}
			// The refusals that a connection setting fixes name it.
			if (code == "28P01" || code == "28000" || code == "3D000") && !strings.Contains(msg, named) {
				t.Errorf("%s: %q does not name %q", code, msg, named)
			}
		}
	}
	reset := errors.New("connection reset by peer")
	if got := Explain(reset, "db.invalid:5432", cfg, "breakers", ""); got.Error() != "postgres at db.invalid:5432: connection reset by peer" || !errors.Is(got, reset) {
		t.Errorf("another error: %q", got)
	}
}
