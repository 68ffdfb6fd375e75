package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/internal/testservers/pgtest"
)

// TestInitPostgres: list on a missing table names "kvbreaker init" (it
// named postgres.CreateTable, Go the operator would have to write); init
// creates the table and says so, a second init says it exists; the SQL of
// init --print, run as it is, makes a table the command uses; a table
// without the trigger (an earlier version's) gets it; a table of another
// shape is refused by init.
func TestInitPostgres(t *testing.T) {
	srv := pgtest.MustStart(t)
	ctx := t.Context()
	conn := []string{"--backend", "postgres", "--postgres-url", srv.URL()}
	with := func(table string, args ...string) []string {
		return append(append(args, conn...), "--postgres-table", table)
	}

	code, _, errOut := runT(t, with("fleet", "list")...)
	if code != exitFail || !strings.Contains(errOut, "table fleet does not exist") || !strings.Contains(errOut, `"kvbreaker init" and the same flags`) ||
		!strings.Contains(errOut, `"kvbreaker init --print"`) {
		t.Fatalf("list on a missing table: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut := runT(t, with("fleet", "init")...)
	if code != exitOK || !strings.Contains(out, "postgres table fleet at "+srv.Addr()+": created") {
		t.Fatalf("init: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runT(t, with("fleet", "list")...); code != exitOK {
		t.Fatalf("list after init: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runT(t, with("fleet", "init", "--format", "json")...)
	var got initOutput
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil || got.Created || !strings.Contains(got.Message, "exists already") {
		t.Fatalf("second init: exit %d, %+v\n%s%s", code, got, out, errOut)
	}

	// --print needs no server: its SQL, run by the operator, is the table.
	code, sql, errOut := runT(t, "init", "--backend", "postgres", "--postgres-table", "printed", "--print")
	if code != exitOK || !strings.Contains(sql, `CREATE TABLE IF NOT EXISTS "printed"`) || !strings.Contains(sql, `CREATE TRIGGER "printed_notify" AFTER INSERT OR UPDATE OR DELETE ON "printed"`) {
		t.Fatalf("init --print: exit %d\n%s%s", code, sql, errOut)
	}
	pool, err := pgxpool.New(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, sql); err != nil {
		t.Fatalf("running init --print's SQL: %v", err)
	}
	if code, out, errOut := runT(t, with("printed", "check", "--quick", "--quiet")...); code != exitOK {
		t.Fatalf("check on the printed table: exit %d\n%s%s", code, out, errOut)
	}

	// A table made without the trigger (by an earlier version) gets it.
	old, err := postgres.Schema("older")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, old[:strings.Index(old, "-- Follow's feed")]); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runT(t, with("older", "init")...)
	if code != exitOK || !strings.Contains(out, "postgres table older at "+srv.Addr()+": exists already; added trigger older_notify") {
		t.Fatalf("init over a table without the trigger: exit %d\n%s%s", code, out, errOut)
	}
	var triggers int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_trigger WHERE tgrelid = 'older'::regclass AND NOT tgisinternal`).Scan(&triggers); err != nil || triggers != 2 {
		t.Fatalf("triggers on the table after init: %d, %v; want 2", triggers, err)
	}

	if _, err := pool.Exec(ctx, `CREATE TABLE other (id int)`); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runT(t, with("other", "init")...)
	if code != exitFail || !strings.Contains(errOut, "postgres table other at "+srv.Addr()+": the store cannot read it") {
		t.Errorf("init over another program's table: exit %d\n%s%s", code, out, errOut)
	}
}

// TestInitDynamoDB: as TestInitPostgres on dynalite, and the AWS CLI JSON
// init --print shows is the very input of CreateTable and UpdateTimeToLive
// (sent here with the SDK, as the CLI would).
func TestInitDynamoDB(t *testing.T) {
	ctx := t.Context()
	table := "init-" + randomHex(4)
	conn := []string{"--backend", "dynamodb", "--dynamodb-table", table, "--dynamodb-endpoint", dynSrv.Endpoint}

	code, _, errOut := runT(t, append([]string{"list"}, conn...)...)
	if code != exitFail || !strings.Contains(errOut, "table "+table+" does not exist") || !strings.Contains(errOut, `"kvbreaker init" and the same flags`) {
		t.Fatalf("list on a missing table: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut := runT(t, append([]string{"init"}, conn...)...)
	if code != exitOK || !strings.Contains(out, "dynamodb table "+table+" in us-east-1 at "+dynSrv.Endpoint+": created") {
		t.Fatalf("init: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runT(t, append([]string{"list"}, conn...)...); code != exitOK {
		t.Fatalf("list after init: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runT(t, append([]string{"init"}, conn...)...)
	if code != exitOK || !strings.Contains(out, "exists already") {
		t.Fatalf("second init: exit %d\n%s%s", code, out, errOut)
	}

	printed := "printed-" + randomHex(4)
	code, cli, errOut := runT(t, "init", "--backend", "dynamodb", "--dynamodb-table", printed, "--print")
	if code != exitOK {
		t.Fatalf("init --print: exit %d\n%s%s", code, cli, errOut)
	}
	inputs := map[string]string{}
	for line := range strings.SplitSeq(cli, "\n") {
		if op, js, ok := strings.Cut(line, " --cli-input-json '"); ok {
			inputs[strings.TrimPrefix(op, "aws dynamodb ")] = strings.TrimSuffix(js, "'")
		}
	}
	var create dyn.CreateTableInput
	var ttl dyn.UpdateTimeToLiveInput
	if err := json.Unmarshal([]byte(inputs["create-table"]), &create); err != nil {
		t.Fatalf("create-table's JSON: %v\n%s", err, cli)
	}
	if err := json.Unmarshal([]byte(inputs["update-time-to-live"]), &ttl); err != nil {
		t.Fatalf("update-time-to-live's JSON: %v\n%s", err, cli)
	}
	if aws.ToString(ttl.TableName) != printed || aws.ToString(ttl.TimeToLiveSpecification.AttributeName) != "purgeAt" || !aws.ToBool(ttl.TimeToLiveSpecification.Enabled) {
		t.Errorf("update-time-to-live input: %+v", ttl)
	}
	client := newClient(dynSrv.Endpoint)
	if _, err := client.CreateTable(ctx, &create); err != nil {
		t.Fatalf("CreateTable with init --print's JSON: %v", err)
	}
	for _, name := range []string{table, printed} {
		d, err := client.DescribeTable(ctx, &dyn.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		if k := d.Table.KeySchema; len(k) != 1 || aws.ToString(k[0].AttributeName) != "pk" || k[0].KeyType != types.KeyTypeHash {
			t.Errorf("%s: key schema %+v", name, k)
		}
	}
	conn[3] = printed
	if code, out, errOut := runT(t, append([]string{"check", "--quick", "--quiet"}, conn...)...); code != exitOK {
		t.Fatalf("check on the printed table: exit %d\n%s%s", code, out, errOut)
	}
}

// TestInitOtherBackends: a store without a table needs nothing; init says
// so and exits 0, and --print connects to nothing; --print refuses what
// the other commands refuse.
func TestInitOtherBackends(t *testing.T) {
	code, out, errOut := runT(t, append([]string{"init"}, connArgs("etcd")...)...)
	if code != exitOK || !strings.Contains(out, "etcd needs no table") {
		t.Errorf("init etcd: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runT(t, "init", "--backend", "redis", "--print")
	if code != exitOK || out != "" || !strings.Contains(errOut, "redis needs no table") {
		t.Errorf("init --print redis: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = runT(t, "init", "--backend", "dynamodb", "--print")
	if code != exitUsage || !strings.Contains(errOut, "needs --dynamodb-table") {
		t.Errorf("init --print dynamodb without a table: exit %d\n%s", code, errOut)
	}
	// --print's flags pass the checks of every command's: here a flag of
	// another backend.
	code, _, errOut = runT(t, "init", "--backend", "postgres", "--print", "--mysql-dsn", "app@tcp(db:3306)/app")
	if code != exitUsage || !strings.Contains(errOut, "--mysql-dsn is a mysql flag, but --backend is postgres") {
		t.Errorf("init --print postgres with --mysql-dsn: exit %d\n%s", code, errOut)
	}
}
