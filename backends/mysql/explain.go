package mysql

import (
	"errors"
	"fmt"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/kvbreaker/kvbreaker/adapter"
)

// Explain says what to change when the server refused a connection or a
// statement of the data source name cfg: a wrong password or user, a
// missing database or privilege. setting names where the data source name
// came from ("--mysql-dsn", "$DATABASE_DSN"; "the data source name" if
// empty). An error that says already what to change is returned as it is
// (one matching ErrNoTable) or with the address in front (a
// *CreateDeniedError), as is any other error. The result wraps err; the
// driver's errors hold neither the data source name nor the password, and
// neither does the result.
func Explain(err error, cfg *gomysql.Config, setting string) error {
	if errors.Is(err, ErrNoTable) {
		return err
	}
	me, ok := errors.AsType[*gomysql.MySQLError](err)
	if _, denied := errors.AsType[*CreateDeniedError](err); !ok || denied {
		return fmt.Errorf("mysql at %s: %w", cfg.Addr, err)
	}
	if setting == "" {
		setting = "the data source name"
	}
	switch me.Number {
	case 1045: // ER_ACCESS_DENIED_ERROR
		return adapter.Explained(err, "mysql at %s refused user %q (%v): check the user and password in %s", cfg.Addr, cfg.User, me, setting)
	case 1049: // ER_BAD_DB_ERROR
		return adapter.Explained(err, "mysql at %s has no database %q (%v): name an existing one in %s (user@tcp(host:port)/DATABASE)", cfg.Addr, cfg.DBName, me, setting)
	case errTableAccessDenied:
		return adapter.Explained(err, "mysql at %s: user %q lacks a privilege (%v): an administrator can GRANT SELECT, INSERT, UPDATE, DELETE ON %s.* TO the user", cfg.Addr, cfg.User, me, cfg.DBName)
	}
	return fmt.Errorf("mysql at %s: user %q, database %q: %w", cfg.Addr, cfg.User, cfg.DBName, err)
}

// errTableAccessDenied is ER_TABLEACCESS_DENIED_ERROR.
const errTableAccessDenied = 1142

// Explain is the package's Explain of err with the data source name Open
// was given (a store New made knows only WithEndpoint's address), naming
// WithSetting's setting.
func (s *Store) Explain(err error) error { return Explain(err, s.cfg, s.o.setting) }
