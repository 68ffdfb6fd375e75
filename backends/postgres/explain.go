package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/tlsdiag"
)

// Explain says what to change when the server at addr refused a connection
// or a statement of the pool cfg configures, as a *pgconn.PgError (which
// pgx puts after a "tls error" line when sslmode=prefer first tried TLS): a
// wrong or missing password, an unknown user or database, a privilege
// missing on table. setting names where the connection string came from
// ("--postgres-url", "$DATABASE_URL"; "the connection string" if empty).
// An error that says already what to change is returned as it is (one
// matching ErrNoTable) or with the address in front (a
// *CreateDeniedError), as is any other error. The result wraps err; it
// never shows the password. A *tlsdiag.Error's Fix names setting.
func Explain(err error, addr string, cfg *pgxpool.Config, table, setting string) error {
	if setting == "" {
		setting = "the connection string"
	}
	if te, ok := errors.AsType[*tlsdiag.Error](err); ok {
		named := *te
		named.Fix = tlsFix(te.Kind, setting)
		return &named
	}
	if errors.Is(err, ErrNoTable) {
		return err
	}
	pe, ok := errors.AsType[*pgconn.PgError](err)
	if _, denied := errors.AsType[*CreateDeniedError](err); !ok || denied {
		return fmt.Errorf("postgres at %s: %w", addr, err)
	}
	user, db := cfg.ConnConfig.User, cfg.ConnConfig.Database
	said := pe.Severity + ": " + pe.Message + " (SQLSTATE " + pe.Code + ")"
	switch pe.Code {
	case "28P01": // invalid_password
		if cfg.ConnConfig.Password == "" {
			return adapter.Explained(err, "postgres at %s wants a password for user %q and none was given (%s): set $PGPASSWORD, or a ~/.pgpass line (host:port:database:user:password) for this server",
				addr, user, said)
		}
		return adapter.Explained(err, "postgres at %s refused the password of user %q (%s): check it where it came from ($PGPASSWORD, ~/.pgpass or %s)", addr, user, said, setting)
	case "28000": // invalid_authorization_specification: no such role, no pg_hba.conf entry
		return adapter.Explained(err, "postgres at %s refused user %q for database %q (%s): name a user the server admits in %s (postgres://USER@host:port/db, user=USER) or $PGUSER; a \"no pg_hba.conf entry\" is the server's pg_hba.conf to change",
			addr, user, db, said, setting)
	case "3D000": // invalid_catalog_name
		return adapter.Explained(err, "postgres at %s has no database %q (%s): name an existing one in %s (postgres://user@host:port/DATABASE, dbname=DATABASE) or $PGDATABASE",
			addr, db, said, setting)
	case "42501": // insufficient_privilege
		return adapter.Explained(err, "postgres at %s: user %q lacks a privilege on table %s (%s): a database owner can GRANT SELECT, INSERT, UPDATE, DELETE ON %s, and USAGE ON SEQUENCE %s_version, TO %q",
			addr, user, table, said, table, table, user)
	}
	return adapter.Explained(err, "postgres at %s: user %q, database %q: %s", addr, user, db, said)
}

// Explain is the package's Explain of err with the store's server, pool
// configuration and table, naming WithSetting's setting.
func (s *Store) Explain(err error) error {
	return Explain(err, s.endpoint, s.pool.Config(), s.table, s.o.setting)
}
