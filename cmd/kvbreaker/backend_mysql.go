package main

import (
	"context"

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
	open:       openSQL(dialMySQL),
	leftBehind: purgedRows("mysql"),
	create:     initSQL(dialMySQL, func(p mysql.Prepared) bool { return p.Existed }),
	creates:    "MySQL's table (--mysql-table, with its expiry index: mysql.CreateTable)",
	prints:     "MySQL's SQL (mysql.SchemaScript; pipe it to mysql)",
	script:     tableScript(mysql.SchemaScript),
	exampleEnv: "KVBREAKER_MYSQL_DSN='app:secret@tcp(db:3306)/app'",
}

// dialMySQL opens a store on a pool of two connections (a command makes a
// few calls; mysql.Dial dials once first, within 2 s).
func dialMySQL(ctx context.Context, f *backendFlags) (*mysql.Store, error) {
	return mysql.Dial(ctx, f.get("mysql-dsn"), f.get("mysql-table"), mysql.WithMaxConns(2), mysql.WithCreateScript(printHint(f)), mysql.WithSetting(f.name("mysql-dsn")))
}
