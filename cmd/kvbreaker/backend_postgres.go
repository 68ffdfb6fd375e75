package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/tlsdiag"
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
	secretEnv: []string{"PGPASSWORD"},
	open:      openPostgres,
	create:    initPostgres,
	creates:   "PostgreSQL's table (--postgres-table, with its version sequence, expiry index, and the trigger that notifies its changes to followers: postgres.CreateTable; an existing one gets the trigger if it lacks it)",
	prints:    "PostgreSQL's SQL (postgres.SchemaScript; pipe it to psql)",
	print:     printScript(postgres.SchemaScript),
	tlsFix: func(f *backendFlags, te *tlsdiag.Error) string {
		if te.Kind == tlsdiag.Untrusted {
			return "give the CA that signed it as sslrootcert= in " + f.name("postgres-url") + " (postgres://…?sslmode=verify-full&sslrootcert=ca.pem) or $PGSSLROOTCERT"
		}
		return te.Fix + " (in " + f.name("postgres-url") + " or the PGSSL* variables)"
	},
	example:  "--postgres-url postgres://app@db:5432/app",
	examples: map[string]string{"init": `  kvbreaker init --backend postgres --postgres-table kvbreaker --print | psql "$DATABASE_URL"`},
}

// defaultPostgresTable is --postgres-table's default.
const defaultPostgresTable = "kvbreaker"

// openPostgres connects a small pool (a command makes a few calls) and
// checks that the server answers and the table exists.
func openPostgres(ctx context.Context, f *backendFlags) (*conn, error) {
	s, explain, err := connectPostgres(ctx, f)
	if err != nil {
		return nil, err
	}
	addr := s.Endpoint()
	if err := s.Ping(ctx); err != nil {
		s.Close()
		if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == "42P01" {
			return nil, fmt.Errorf("postgres: table %s does not exist at %s: %s", f.get("postgres-table"), addr, createHint)
		}
		return nil, noAnswer(ctx, "postgres", addr, f.bound, explain(err))
	}
	return &conn{describe: s.String(), store: s,
		leftBehind: "records expire within 10 minutes, but the rows stay until a purge (postgres.Store.Purge, which the fleet's stores run every " + strconv.Itoa(adapter.DefaultPurge.Every) + " writes) removes them",
		wipes:      "rows changed with the table's triggers off (DISABLE TRIGGER, session_replication_role = replica, pg_restore --disable-triggers) reach no mirror: restart the fleet's processes after such a change"}, nil
}

// connectPostgres opens a store of two connections (postgres.Open: it
// dials once first, within dialTimeout), and explain: postgres.Explain,
// naming --postgres-url as the setting to change.
func connectPostgres(ctx context.Context, f *backendFlags) (s *postgres.Store, explain func(error) error, err error) {
	cfg, err := postgres.ParseConfig(f.get("postgres-url"))
	if err != nil {
		return nil, nil, usagef("%s: %v", f.name("postgres-url"), err)
	}
	cfg.MaxConns, cfg.ConnConfig.ConnectTimeout = 2, dialTimeout
	if s, err = postgres.Open(ctx, cfg, f.get("postgres-table")); err != nil {
		return nil, nil, err
	}
	return s, func(err error) error {
		return postgres.Explain(err, s.Endpoint(), cfg, f.get("postgres-table"), f.name("postgres-url"))
	}, nil
}

// initPostgres creates the table unless it exists, or adds the trigger it
// lacks, once the store can read it (postgres.Prepare).
func initPostgres(ctx context.Context, f *backendFlags) (initOutput, error) {
	s, explain, err := connectPostgres(ctx, f)
	if err != nil {
		return initOutput{}, err
	}
	defer s.Close()
	p, err := postgres.Prepare(ctx, s.Pool(), f.get("postgres-table"))
	if de, ok := errors.AsType[*postgres.CreateDeniedError](err); ok {
		de.Script = printHint(f)
		return initOutput{}, fmt.Errorf("postgres at %s: %w", s.Endpoint(), de)
	}
	return prepared(ctx, f, s.String(), s.Endpoint(), p, p.Existed, err, postgres.ErrForeignTable, explain)
}
