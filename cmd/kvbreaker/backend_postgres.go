package main

import (
	"context"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
)

var postgresBackend = backendDesc{
	name:  "postgres",
	title: "PostgreSQL",
	about: "(PostgreSQL)",
	flags: []connFlag{
		{name: "postgres-url", env: "KVBREAKER_POSTGRES_URL", usage: "postgres: connection `URL`, e.g. postgres://user@db:5432/app, or keyword/value settings, e.g. 'host=db user=app dbname=app' (a password belongs in $PGPASSWORD or ~/.pgpass; output never shows one)", secret: true,
			need: true, check: checkWith(postgres.CheckURL, redactDSN)},
		{name: "postgres-table", env: "KVBREAKER_POSTGRES_TABLE", usage: "postgres: the table (postgres.CreateTable)", value: defaultPostgresTable, need: true, check: tableCheck(postgres.Schema)},
	},
	usage: `--postgres-url postgres://user@db:5432/app [--postgres-table kvbreaker]
or --postgres-url 'host=db user=app dbname=app'
(password: $PGPASSWORD or ~/.pgpass, best not in the URL;
TLS: ?sslmode=verify-full&sslrootcert=ca.pem, or $PGSSLROOTCERT)`,
	envHelp: `  PGSSLMODE, PGSSLROOTCERT, PGSSLCERT, PGSSLKEY, PGPASSWORD, ...
                 libpq's variables, as psql reads them (sslmode=, sslrootcert=, … in
                 --postgres-url win)
`,
	secretEnv:  []string{"PGPASSWORD"},
	open:       openSQL(dialPostgres),
	leftBehind: purgedRows("postgres"),
	wipes:      "rows changed with the table's triggers off (DISABLE TRIGGER, session_replication_role = replica, pg_restore --disable-triggers) reach no mirror: restart the fleet's processes after such a change",
	create:     initSQL(dialPostgres, func(p postgres.Prepared) bool { return p.Existed }),
	creates:    "PostgreSQL's table (--postgres-table, with its version sequence, expiry index, and the trigger that notifies its changes to followers: postgres.CreateTable; an existing one gets the trigger if it lacks it)",
	prints:     "PostgreSQL's SQL (postgres.SchemaScript; pipe it to psql)",
	script:     tableScript(postgres.SchemaScript),
	example:    "--postgres-url postgres://app@db:5432/app",
	examples:   map[string]string{"init": `  kvbreaker init --backend postgres --postgres-table kvbreaker --print | psql "$DATABASE_URL"`},
}

// defaultPostgresTable is --postgres-table's default.
const defaultPostgresTable = "kvbreaker"

// dialPostgres opens a store on a pool of two connections (a command makes
// a few calls; postgres.Dial dials once first, within 2 s).
func dialPostgres(ctx context.Context, f *backendFlags) (*postgres.Store, error) {
	return postgres.Dial(ctx, f.get("postgres-url"), f.get("postgres-table"), postgres.WithMaxConns(2), postgres.WithCreateScript(printHint(f)), postgres.WithSetting(f.name("postgres-url")))
}
