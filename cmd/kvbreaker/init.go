//go:build !simulateonly

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/backends/sqlite"
	"github.com/kvbreaker/kvbreaker/driver"
)

const initLong = `Creates what a store needs before a fleet (or list, inspect, reset and
check) can use it: PostgreSQL's table (--postgres-table, with its version
sequence, expiry index, and the trigger that notifies its changes to
followers: postgres.CreateTable), SQLite's file and tables (--sqlite-path,
in WAL mode: sqlite.Open) and DynamoDB's table
(--dynamodb-table, partition key "pk", on-demand, TTL on "purgeAt":
dynamodb.CreateTable). It is idempotent: an existing table is left as it is
(PostgreSQL's is read once to check its columns, and gets the trigger if it
lacks it) and init says so. etcd,
Redis, Workers KV and memory need nothing created; init says so and exits 0
(a Workers KV namespace is created with Cloudflare's tools: wrangler kv
namespace create NAME).

--print connects to nothing and prints what init would run, for a database
owner or a migration tool: PostgreSQL's SQL (postgres.Schema; pipe it to
psql; sqlite.Schema, to pipe to sqlite3) or the AWS CLI commands with the
tables' JSON.

` + backendFlagsHelp

const initExample = `  kvbreaker init --backend postgres --postgres-url postgres://app@db:5432/app
  kvbreaker init --backend postgres --postgres-table kvbreaker --print | psql "$DATABASE_URL"
  KVBREAKER_MYSQL_DSN='app:secret@tcp(db:3306)/app' kvbreaker init --backend mysql
  AWS_REGION=eu-west-1 kvbreaker init --backend dynamodb --dynamodb-table kvbreaker
  kvbreaker init --backend dynamodb --dynamodb-table kvbreaker --print
  kvbreaker init --backend sqlite --sqlite-path /var/lib/app/kvbreaker.db`

type initFlags struct {
	bf      backendFlags
	format  string
	timeout time.Duration
	print   bool
}

func newInitCmd() *cobra.Command {
	var f initFlags
	cmd := &cobra.Command{
		Use:     "init --backend postgres|mysql|dynamodb [connection flags] [--print]",
		Short:   "create the table PostgreSQL, MySQL or DynamoDB needs (or print its SQL / AWS CLI commands)",
		Long:    initLong,
		Example: initExample,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runInit(cmd.Context(), &f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	f.bf.register(fs)
	fs.StringVar(&f.format, "format", "table", "output format: table or json (not with --print)")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Minute, "give up after this long (a new DynamoDB table takes seconds to become ACTIVE)")
	fs.BoolVar(&f.print, "print", false, "print the SQL (postgres, mysql) or AWS CLI commands (dynamodb) instead of running them; connects to nothing")
	completeFlags(cmd)
	return cmd
}

// needsTable reports whether a backend's store needs a table created.
func needsTable(backend string) bool {
	return backend == "postgres" || backend == "mysql" || backend == "dynamodb" || backend == "sqlite"
}

// nothingToCreate is what init says of a backend that needs no table.
func nothingToCreate(backend string) string {
	if backend == "cloudflarekv" {
		return "cloudflarekv needs no table: the Breakers' keys go into the Workers KV namespace --cf-namespace names, which init does not create (wrangler kv namespace create NAME)"
	}
	return backend + " needs no table: nothing to create"
}

// initOutput is init's JSON.
type initOutput struct {
	Backend string `json:"backend"`
	Target  string `json:"target"`
	Table   string `json:"table"`
	// Created is false when the table existed already (or the backend
	// needs none).
	Created bool   `json:"created"`
	Message string `json:"message"`
}

func runInit(ctx context.Context, f *initFlags, stdout, stderr io.Writer) error {
	if err := f.bf.applyEnv(); err != nil {
		return err
	}
	if err := checkFormat(f.format); err != nil {
		return err
	}
	if f.timeout <= 0 {
		return usagef("--timeout must be positive")
	}
	if f.print {
		if f.format != "table" {
			return usagef("--print prints SQL or shell commands: drop --format")
		}
		return printInit(&f.bf, stdout, stderr)
	}
	if err := f.bf.validate(); err != nil {
		return err
	}
	def := backends[f.bf.backend]
	var out initOutput
	if !needsTable(def.flags) {
		out = initOutput{Backend: f.bf.backend, Message: nothingToCreate(def.flags)}
	} else {
		ctx, cancel := context.WithTimeout(ctx, f.timeout)
		defer cancel()
		f.bf.bound = fmt.Sprintf("--timeout %v", f.timeout)
		var err error
		switch def.flags {
		case "postgres":
			out, err = initPostgres(ctx, &f.bf)
		case "mysql":
			out, err = initMySQL(ctx, &f.bf)
		case "dynamodb":
			out, err = initDynamoDB(ctx, &f.bf)
		case "sqlite":
			out, err = initSQLite(ctx, &f.bf)
		}
		if err != nil {
			return err
		}
	}
	if f.format == "json" {
		return writeJSON(stdout, out)
	}
	fmt.Fprintln(stdout, out.Message)
	return nil
}

// printInit prints what init would run, without connecting.
func printInit(bf *backendFlags, stdout, stderr io.Writer) error {
	switch {
	case bf.backend == "":
		return usagef("--backend is required (or $KVBREAKER_BACKEND): one of %s", strings.Join(backendNames(), ", "))
	case backends[bf.backend].open == nil:
		return usagef("%s is %q: want one of %s", bf.name("backend"), bf.backend, strings.Join(backendNames(), ", "))
	}
	switch backends[bf.backend].flags {
	case "mysql":
		return printMySQL(bf, stdout)
	case "postgres":
		sql, err := postgres.Schema(bf.pgTable)
		if err != nil {
			return usagef("%s: %v", bf.name("postgres-table"), err)
		}
		fmt.Fprintf(stdout, "-- The table kvbreaker's PostgreSQL store uses (postgres.Schema %q), as \"kvbreaker init\" creates it.\n", bf.pgTable)
		fmt.Fprintf(stdout, "-- The fleet's user needs SELECT, INSERT, UPDATE, DELETE on it and USAGE on the sequence.\n")
		fmt.Fprintf(stdout, "-- Its trigger notifies channel %s of each change, for followers (postgres.Store.Follow).\n%s", postgres.Channel(bf.pgTable), sql)
		return nil
	case "sqlite":
		fmt.Fprintf(stdout, "-- The tables kvbreaker's SQLite store uses (sqlite.Schema), as \"kvbreaker init\" creates them.\n")
		fmt.Fprintf(stdout, "-- The store also sets journal_mode=WAL, which the file keeps.\nPRAGMA journal_mode = WAL;\n%s\n", sqlite.Schema)
		return nil
	case "dynamodb":
		if bf.dynamoTable == "" {
			return usagef("--backend dynamodb needs --dynamodb-table (or $%s)", envOf("dynamodb-table"))
		}
		if !dynamoTableName.MatchString(bf.dynamoTable) {
			return usagef("%s is %q: name a table of 3 to 255 letters, digits, '_', '-' or '.'", bf.name("dynamodb-table"), bf.dynamoTable)
		}
		create, ttl := dynamoTableJSON(bf.dynamoTable)
		endpoint := ""
		if bf.dynamoEndpoint != "" {
			if err := bf.checkURL("dynamodb-endpoint", bf.dynamoEndpoint); err != nil {
				return err
			}
			endpoint = " --endpoint-url " + shellWord(redactURL(bf.dynamoEndpoint))
		}
		fmt.Fprintf(stdout, "# The DynamoDB table kvbreaker's store uses, as \"kvbreaker init\" creates it (dynamodb.CreateTable),\n")
		fmt.Fprintf(stdout, "# with the AWS CLI v2 (region and credentials from AWS_REGION, AWS_PROFILE, ...).\n")
		fmt.Fprintf(stdout, "aws dynamodb create-table%s --cli-input-json %s\n", endpoint, shellQuote(create))
		fmt.Fprintf(stdout, "aws dynamodb wait table-exists%s --table-name %s\n", endpoint, shellQuote(bf.dynamoTable))
		fmt.Fprintf(stdout, "# TTL lets DynamoDB delete expired items (within days); the store reads them as absent either way.\n")
		fmt.Fprintf(stdout, "aws dynamodb update-time-to-live%s --cli-input-json %s\n", endpoint, shellQuote(ttl))
		return nil
	}
	fmt.Fprintln(stderr, nothingToCreate(backends[bf.backend].flags))
	return nil
}

// dynamoTableName is DynamoDB's rule for table names.
var dynamoTableName = regexp.MustCompile(`^[A-Za-z0-9_.-]{3,255}$`)

// dynamoTableJSON is the input of CreateTable and UpdateTimeToLive that
// dynamodb.CreateTable sends, as the AWS CLI's --cli-input-json takes it
// (the API's own shapes).
func dynamoTableJSON(table string) (create, ttl string) {
	type attr struct {
		AttributeName string
		AttributeType types.ScalarAttributeType
	}
	type key struct {
		AttributeName string
		KeyType       types.KeyType
	}
	c, _ := json.Marshal(struct {
		TableName            string
		AttributeDefinitions []attr
		KeySchema            []key
		BillingMode          types.BillingMode
	}{table, []attr{{dynamodb.AttrKey, types.ScalarAttributeTypeS}}, []key{{dynamodb.AttrKey, types.KeyTypeHash}}, types.BillingModePayPerRequest})
	type spec struct {
		AttributeName string
		Enabled       bool
	}
	t, _ := json.Marshal(struct {
		TableName               string
		TimeToLiveSpecification spec
	}{table, spec{dynamodb.AttrPurgeAt, true}})
	return string(c), string(t)
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// initPostgres creates the table (postgres.CreateTable) unless it exists,
// and checks that the store can read it.
func initPostgres(ctx context.Context, f *backendFlags) (initOutput, error) {
	pool, cfg, addr, err := connectPostgres(ctx, f)
	if err != nil {
		return initOutput{}, err
	}
	defer pool.Close()
	target := "postgres table " + f.pgTable + " at " + addr
	out := initOutput{Backend: f.backend, Target: target, Table: f.pgTable}
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", `"`+f.pgTable+`"`).Scan(&exists); err != nil {
		return out, noAnswer(ctx, "postgres", addr, f.bound, pgServerError(addr, f, cfg, err))
	}
	// An existing table may come from a version without the trigger
	// Follow needs: CreateTable adds it (every statement is idempotent).
	var triggered bool
	if exists {
		if err := pool.QueryRow(ctx, "SELECT count(*) = 2 FROM pg_trigger WHERE tgrelid = to_regclass($1) AND tgname IN ($2, $3)",
			`"`+f.pgTable+`"`, f.pgTable+"_notify", f.pgTable+"_truncate").Scan(&triggered); err != nil {
			return out, noAnswer(ctx, "postgres", addr, f.bound, pgServerError(addr, f, cfg, err))
		}
	}
	create := func() error {
		if err := postgres.CreateTable(ctx, pool, f.pgTable); err != nil {
			if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == "42501" {
				return fmt.Errorf("postgres at %s: user %q may not create table %s or its trigger (%s: %s, SQLSTATE %s): have the database or table owner run what \"kvbreaker init --backend postgres --postgres-table %s --print\" shows, and grant the user SELECT, INSERT, UPDATE, DELETE on it and USAGE on its sequence",
					addr, cfg.ConnConfig.User, f.pgTable, pe.Severity, pe.Message, pe.Code, f.pgTable)
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
	s, err := postgres.New(pool, f.pgTable, postgres.WithPurgeEvery(0))
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
	trig := f.pgTable + "_notify"
	switch {
	case exists && triggered:
		out.Message = target + ": exists already; nothing changed (the store reads it)"
		return out, nil
	case exists:
		out.Message = fmt.Sprintf("%s: exists already; added trigger %s, which following its changes needs (the store reads it)", target, trig)
		return out, nil
	}
	seq, idx := f.pgTable+"_version", f.pgTable+"_purge_at"
	out.Created = true
	out.Message = fmt.Sprintf("%s: created (with sequence %s, index %s and trigger %s)", target, seq, idx, trig)
	return out, nil
}

// initDynamoDB creates the table (dynamodb.CreateTable) unless it exists,
// waiting until it is ACTIVE, and enables TTL on it.
func initDynamoDB(ctx context.Context, f *backendFlags) (initOutput, error) {
	client, where, endpoint, err := dynamoClient(ctx, f)
	if err != nil {
		return initOutput{}, err
	}
	out := initOutput{Backend: f.backend, Target: where, Table: f.dynamoTable}
	_, derr := client.DescribeTable(ctx, &dyn.DescribeTableInput{TableName: aws.String(f.dynamoTable)})
	_, missing := errors.AsType[*types.ResourceNotFoundException](derr)
	if derr != nil && !missing {
		if ctx.Err() != nil {
			return out, noAnswer(ctx, "dynamodb", endpoint, f.bound, derr)
		}
		return out, fmt.Errorf("dynamodb: describe table %s at %s: %w", f.dynamoTable, endpoint, derr)
	}
	if err := dynamodb.CreateTable(ctx, client, f.dynamoTable); err != nil {
		if ctx.Err() != nil {
			return out, noAnswer(ctx, "dynamodb", endpoint, f.bound, err)
		}
		return out, fmt.Errorf("%s: %w", where, err)
	}
	if missing {
		out.Created = true
		out.Message = where + ": created (partition key \"" + dynamodb.AttrKey + "\", on-demand billing, TTL on \"" + dynamodb.AttrPurgeAt + "\" where the server has the TTL API)"
		return out, nil
	}
	out.Message = where + ": exists already, with the key schema the store needs; TTL on \"" + dynamodb.AttrPurgeAt + "\" checked"
	return out, nil
}
