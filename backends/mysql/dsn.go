package mysql

import (
	"errors"
	"fmt"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"
)

// CheckDSN checks a data source name as Open takes it
// (go-sql-driver/mysql's user[:password]@tcp(host:port)/database[?options])
// without connecting, for a tool that validates its settings before it
// dials: one that does not parse, is written as a URL, or names no
// database is an error. The error never quotes the name, which may carry
// the password.
func CheckDSN(dsn string) error {
	if scheme, _, ok := strings.Cut(dsn, "://"); ok && scheme != "" && !strings.ContainsAny(scheme, " =@(") {
		return errors.New("it is a URL: want go-sql-driver/mysql's user[:password]@tcp(host:port)/database, e.g. app@tcp(db:3306)/app")
	}
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("%w: want user[:password]@tcp(host:port)/database, e.g. app@tcp(db:3306)/app", err)
	}
	if cfg.DBName == "" {
		return errors.New("it names no database: want user[:password]@tcp(host:port)/database")
	}
	return nil
}
