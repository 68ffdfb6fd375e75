package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/backends/mysql"
)

var mysqlBackend = backendDesc{
	name:  "mysql",
	title: "MySQL",
	about: "(MySQL or MariaDB)",
	flags: []connFlag{
		{name: "mysql-dsn", env: "KVBREAKER_MYSQL_DSN", usage: "mysql: go-sql-driver/mysql data source name, user[:password]@tcp(host:port)/database[?options], for MySQL or MariaDB (output never shows it)", need: true, check: checkWith(mysql.CheckDSN, nil)},
		{name: "mysql-table", env: "KVBREAKER_MYSQL_TABLE", usage: "mysql: the table (mysql.CreateTable)", value: "kvbreaker", need: true, check: tableCheck(mysql.Schema)},
	},
	usage: `--mysql-dsn 'app:secret@tcp(db:3306)/app' [--mysql-table kvbreaker]
(best from $KVBREAKER_MYSQL_DSN: a flag shows in ps)`,
	open:       openMySQL,
	create:     initMySQL,
	creates:    "MySQL's table (--mysql-table, with its expiry index: mysql.CreateTable)",
	prints:     "MySQL's SQL (mysql.SchemaScript; pipe it to mysql)",
	print:      printScript(mysql.SchemaScript),
	exampleEnv: "KVBREAKER_MYSQL_DSN='app:secret@tcp(db:3306)/app'",
}

// openMySQL connects a small pool (a command makes a few calls) and
// checks that the server answers and the table exists.
func openMySQL(ctx context.Context, f *backendFlags) (*conn, error) {
	s, cfg, err := connectMySQL(ctx, f)
	if err != nil {
		return nil, err
	}
	if err := s.Ping(ctx); err != nil {
		s.Close()
		if me, ok := errors.AsType[*gomysql.MySQLError](err); ok && me.Number == 1146 { // ER_NO_SUCH_TABLE
			return nil, fmt.Errorf("mysql: table %s does not exist in database %s at %s: %s", f.get("mysql-table"), cfg.DBName, cfg.Addr, createHint)
		}
		return nil, noAnswer(ctx, "mysql", cfg.Addr, f.bound, mysql.Explain(err, cfg, "--mysql-dsn"))
	}
	return &conn{describe: s.String(), store: s,
		leftBehind: "records expire within 10 minutes, but the rows stay until a purge (mysql.Store.Purge, which the fleet's stores run every " + strconv.Itoa(adapter.DefaultPurge.Every) + " writes) removes them"}, nil
}

// connectMySQL opens a store of two connections (mysql.Open: it dials once
// first, within 2 s) and returns the parsed DSN (for its address
// and database).
func connectMySQL(ctx context.Context, f *backendFlags) (*mysql.Store, *gomysql.Config, error) {
	cfg, err := gomysql.ParseDSN(f.get("mysql-dsn"))
	if err != nil {
		return nil, nil, usagef("%s (not shown): %v", f.name("mysql-dsn"), err)
	}
	s, err := mysql.Open(ctx, cfg, f.get("mysql-table"), mysql.WithMaxConns(2))
	return s, cfg, err
}

// initMySQL creates the table unless it exists, and checks that the store
// can read it (mysql.Prepare).
func initMySQL(ctx context.Context, f *backendFlags) (initOutput, error) {
	s, cfg, err := connectMySQL(ctx, f)
	if err != nil {
		return initOutput{}, err
	}
	defer s.Close()
	p, err := mysql.Prepare(ctx, s.DB(), f.get("mysql-table"), mysql.WithEndpoint(cfg.Addr))
	if de, ok := errors.AsType[*mysql.CreateDeniedError](err); ok {
		de.Script = printHint(f)
		return initOutput{}, fmt.Errorf("mysql at %s: %w", cfg.Addr, de)
	}
	return prepared(ctx, f, s.String(), cfg.Addr, p, p.Existed, err, mysql.ErrForeignTable,
		func(err error) error { return mysql.Explain(err, cfg, "--mysql-dsn") })
}
