package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/tlsdiag"
)

var postgresBackend = backendDesc{
	name:  "postgres",
	title: "PostgreSQL",
	about: "(PostgreSQL)",
	flags: []connFlag{
		{name: "postgres-url", env: "KVBREAKER_POSTGRES_URL", usage: "postgres: connection `URL`, e.g. postgres://user@db:5432/app, or keyword/value settings, e.g. 'host=db user=app dbname=app' (a password belongs in $PGPASSWORD or ~/.pgpass; output never shows one)", secret: true},
		{name: "postgres-table", env: "KVBREAKER_POSTGRES_TABLE", usage: "postgres: the table (postgres.CreateTable)", value: defaultPostgresTable},
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
	validate: func(f *backendFlags) error {
		if err := f.need("postgres-url"); err != nil {
			return err
		}
		return f.checkPostgresURL()
	},
	open:    openPostgres,
	create:  initPostgres,
	creates: "PostgreSQL's table (--postgres-table, with its version sequence, expiry index, and the trigger that notifies its changes to followers: postgres.CreateTable; an existing one gets the trigger if it lacks it)",
	prints:  "PostgreSQL's SQL (postgres.Schema; pipe it to psql)",
	print:   printPostgres,
	tlsFix: func(f *backendFlags, te *tlsdiag.Error) string {
		if te.Kind == tlsdiag.Untrusted {
			return "give the CA that signed it as sslrootcert= in " + f.name("postgres-url") + " (postgres://…?sslmode=verify-full&sslrootcert=ca.pem) or $PGSSLROOTCERT"
		}
		return te.Fix + " (in " + f.name("postgres-url") + " or the PGSSL* variables)"
	},
	examples: map[string]string{
		"init": `  kvbreaker init --backend postgres --postgres-url postgres://app@db:5432/app
  kvbreaker init --backend postgres --postgres-table kvbreaker --print | psql "$DATABASE_URL"`,
	},
}

// defaultPostgresTable is --postgres-table's default.
const defaultPostgresTable = "kvbreaker"

// checkPostgresURL checks --postgres-url without connecting.
// It takes what pgx takes: a postgres:// URL or a keyword/value string
// (host=db user=app dbname=app); messages show it redacted (redactDSN).
func (f *backendFlags) checkPostgresURL() error {
	if isURL(f.get("postgres-url")) && !strings.HasPrefix(f.get("postgres-url"), "postgres://") && !strings.HasPrefix(f.get("postgres-url"), "postgresql://") {
		return usagef("%s is %q: want a postgres:// URL, e.g. postgres://user@db:5432/app, or keyword/value settings (host=db user=app dbname=app)",
			f.name("postgres-url"), redactDSN(f.get("postgres-url")))
	}
	if _, err := pgxpool.ParseConfig(f.get("postgres-url")); err != nil {
		return usagef("%s is %q: %s", f.name("postgres-url"), redactDSN(f.get("postgres-url")), pgParseReason(err))
	}
	if _, err := postgres.Schema(f.get("postgres-table")); err != nil {
		return usagef("%s: %v", f.name("postgres-table"), err)
	}
	return nil
}

// openPostgres connects a small pool (a command makes a few calls) and
// checks that the server answers and the table exists.
func openPostgres(ctx context.Context, f *backendFlags) (*conn, error) {
	pool, cfg, addr, err := connectPostgres(ctx, f)
	if err != nil {
		return nil, err
	}
	s, err := postgres.New(pool, f.get("postgres-table"))
	if err != nil {
		pool.Close()
		return nil, err
	}
	if err := s.Ping(ctx); err != nil {
		pool.Close()
		if te, ok := errors.AsType[*tlsdiag.Error](err); ok {
			return nil, tlsFlagError(f, te)
		}
		if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == "42P01" {
			return nil, fmt.Errorf("postgres: table %s does not exist at %s: %s", f.get("postgres-table"), addr, createHint)
		}
		return nil, noAnswer(ctx, "postgres", addr, f.bound, pgServerError(addr, f, cfg, err))
	}
	return &conn{describe: "postgres table " + f.get("postgres-table") + " at " + addr, store: &pgStore{Store: s, pool: pool}, purge: pgPurge(pool, f.get("postgres-table")),
		leftBehind: "records expire within 10 minutes, but the rows stay until a purge (postgres.Store.Purge, which the fleet's stores run every 1000 writes) removes them",
		wipes:      "rows changed with the table's triggers off (DISABLE TRIGGER, session_replication_role = replica, pg_restore --disable-triggers) reach no mirror: restart the fleet's processes after such a change"}, nil
}

// connectPostgres checks that the server's port accepts a connection and
// returns a small pool and the address it connects to (host:port, or a unix
// socket's path), for messages.
func connectPostgres(ctx context.Context, f *backendFlags) (*pgxpool.Pool, *pgxpool.Config, string, error) {
	cfg, err := pgxpool.ParseConfig(f.get("postgres-url"))
	if err != nil {
		return nil, nil, "", usagef("%s is %q: %s", f.name("postgres-url"), redactDSN(f.get("postgres-url")), pgParseReason(err))
	}
	cfg.MaxConns = 2
	cfg.ConnConfig.ConnectTimeout = dialTimeout
	cc := cfg.ConnConfig
	addr := net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))
	network := "tcp"
	if strings.HasPrefix(cc.Host, "/") {
		addr, network = cc.Host+"/.s.PGSQL."+strconv.Itoa(int(cc.Port)), "unix"
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	c, err := (&net.Dialer{}).DialContext(dctx, network, addr)
	cancel()
	if err != nil {
		return nil, nil, "", &reachError{backend: "postgres", endpoint: addr, why: dialCause(err), err: err}
	}
	c.Close()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, "", fmt.Errorf("postgres at %s: %w", addr, err)
	}
	return pool, cfg, addr, nil
}

// pgPurge deletes a row whatever it holds: check's cleanup removes the
// tombstones and expired rows its writes left, which the store keeps until
// its purge (postgres.WithPurgeDelay after expiry).
func pgPurge(pool *pgxpool.Pool, table string) func(ctx context.Context, fullKey string) (int, error) {
	sql := `DELETE FROM "` + table + `" WHERE key = $1` // table passed postgres.Schema's check
	return func(ctx context.Context, fullKey string) (int, error) {
		tag, err := pool.Exec(ctx, sql, fullKey)
		if err != nil {
			return 0, fmt.Errorf("postgres: purge %q: %w", fullKey, err)
		}
		return int(tag.RowsAffected()), nil
	}
}

// pgStore is the command's store: closing it closes the pool too.
type pgStore struct {
	*postgres.Store
	pool *pgxpool.Pool
}

func (s *pgStore) Close() error {
	err := s.Store.Close()
	s.pool.Close()
	return err
}

// pgServerError explains a failed connection or first statement of
// PostgreSQL at addr: the server's own refusal (a *pgconn.PgError, which pgx
// puts after a "tls error" line when sslmode=prefer first tried TLS), with
// the flag or variable that fixes it. Any other error is returned with the
// address in front.
func pgServerError(addr string, f *backendFlags, cfg *pgxpool.Config, err error) error {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	if !ok {
		return fmt.Errorf("postgres at %s: %w", addr, err)
	}
	user, db := cfg.ConnConfig.User, cfg.ConnConfig.Database
	url := f.name("postgres-url")
	said := pe.Severity + ": " + pe.Message + " (SQLSTATE " + pe.Code + ")"
	switch pe.Code {
	case "28P01": // invalid_password
		fix := "set $PGPASSWORD, or a ~/.pgpass line (host:port:database:user:password) for this server"
		if cfg.ConnConfig.Password == "" {
			return fmt.Errorf("postgres at %s wants a password for user %q and none was given (%s): %s", addr, user, said, fix)
		}
		return fmt.Errorf("postgres at %s refused the password of user %q (%s): check it where it came from ($PGPASSWORD, ~/.pgpass or %s)", addr, user, said, url)
	case "28000": // invalid_authorization_specification: no such role, no pg_hba.conf entry
		return fmt.Errorf("postgres at %s refused user %q for database %q (%s): name a user the server admits in %s (postgres://USER@host:port/db, user=USER) or $PGUSER; a \"no pg_hba.conf entry\" is the server's pg_hba.conf to change",
			addr, user, db, said, url)
	case "3D000": // invalid_catalog_name
		return fmt.Errorf("postgres at %s has no database %q (%s): name an existing one in %s (postgres://user@host:port/DATABASE, dbname=DATABASE) or $PGDATABASE",
			addr, db, said, url)
	case "42501": // insufficient_privilege
		return fmt.Errorf("postgres at %s: user %q lacks a privilege on table %s (%s): a database owner can GRANT SELECT, INSERT, UPDATE, DELETE ON %s, and USAGE ON SEQUENCE %s_version, TO %q",
			addr, user, f.get("postgres-table"), said, f.get("postgres-table"), f.get("postgres-table"), user)
	}
	return fmt.Errorf("postgres at %s: user %q, database %q: %s", addr, user, db, said)
}

// initPostgres creates the table (postgres.CreateTable) unless it exists,
// and checks that the store can read it.
func initPostgres(ctx context.Context, f *backendFlags) (initOutput, error) {
	pool, cfg, addr, err := connectPostgres(ctx, f)
	if err != nil {
		return initOutput{}, err
	}
	defer pool.Close()
	target := "postgres table " + f.get("postgres-table") + " at " + addr
	out := initOutput{Backend: f.backend, Target: target, Table: f.get("postgres-table")}
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", `"`+f.get("postgres-table")+`"`).Scan(&exists); err != nil {
		return out, noAnswer(ctx, "postgres", addr, f.bound, pgServerError(addr, f, cfg, err))
	}
	// An existing table may come from a version without the trigger
	// Follow needs: CreateTable adds it (every statement is idempotent).
	var triggered bool
	if exists {
		if err := pool.QueryRow(ctx, "SELECT count(*) = 2 FROM pg_trigger WHERE tgrelid = to_regclass($1) AND tgname IN ($2, $3)",
			`"`+f.get("postgres-table")+`"`, f.get("postgres-table")+"_notify", f.get("postgres-table")+"_truncate").Scan(&triggered); err != nil {
			return out, noAnswer(ctx, "postgres", addr, f.bound, pgServerError(addr, f, cfg, err))
		}
	}
	create := func() error {
		if err := postgres.CreateTable(ctx, pool, f.get("postgres-table")); err != nil {
			if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == "42501" {
				return fmt.Errorf("postgres at %s: user %q may not create table %s or its trigger (%s: %s, SQLSTATE %s): have the database or table owner run what \"kvbreaker init --backend postgres --postgres-table %s --print\" shows, and grant the user SELECT, INSERT, UPDATE, DELETE on it and USAGE on its sequence",
					addr, cfg.ConnConfig.User, f.get("postgres-table"), pe.Severity, pe.Message, pe.Code, f.get("postgres-table"))
			}
			return noAnswer(ctx, "postgres", addr, f.bound, pgServerError(addr, f, cfg, err))
		}
		return nil
	}
	if !exists {
		if err := create(); err != nil {
			return out, err
		}
	}
	// Read it as the store does: a table of another shape fails here.
	s, err := postgres.New(pool, f.get("postgres-table"), postgres.WithPurgeEvery(0))
	if err != nil {
		return out, err
	}
	defer s.Close()
	if _, _, err := s.Get(ctx, "kvbreaker-init-check.invalid"); err != nil && !errors.Is(err, driver.ErrNotFound) {
		return out, fmt.Errorf("%s: the store cannot read it (is it another program's table? see \"kvbreaker init --print\" for the one it needs): %w", target, pgServerError(addr, f, cfg, err))
	}
	// After the read: another program's table gets no trigger of ours.
	if exists && !triggered {
		if err := create(); err != nil {
			return out, err
		}
	}
	trig := f.get("postgres-table") + "_notify"
	switch {
	case exists && triggered:
		out.Message = target + ": exists already; nothing changed (the store reads it)"
		return out, nil
	case exists:
		out.Message = fmt.Sprintf("%s: exists already; added trigger %s, which following its changes needs (the store reads it)", target, trig)
		return out, nil
	}
	seq, idx := f.get("postgres-table")+"_version", f.get("postgres-table")+"_purge_at"
	out.Created = true
	out.Message = fmt.Sprintf("%s: created (with sequence %s, index %s and trigger %s)", target, seq, idx, trig)
	return out, nil
}

// printPostgres prints the table's SQL.
func printPostgres(bf *backendFlags, stdout io.Writer) error {
	table := bf.get("postgres-table")
	sql, err := postgres.Schema(table)
	if err != nil {
		return usagef("%s: %v", bf.name("postgres-table"), err)
	}
	fmt.Fprintf(stdout, "-- The table kvbreaker's PostgreSQL store uses (postgres.Schema %q), as \"kvbreaker init\" creates it.\n", table)
	fmt.Fprintf(stdout, "-- The fleet's user needs SELECT, INSERT, UPDATE, DELETE on it and USAGE on the sequence.\n")
	fmt.Fprintf(stdout, "-- Its trigger notifies channel %s of each change, for followers (postgres.Store.Follow).\n%s", postgres.Channel(table), sql)
	return nil
}
