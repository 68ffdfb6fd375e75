package main

import (
	"context"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
)

var dynamodbBackend = backendDesc{
	name:  "dynamodb",
	title: "DynamoDB",
	about: "(Amazon DynamoDB)",
	flags: []connFlag{
		{name: "dynamodb-table", env: "KVBREAKER_DYNAMODB_TABLE", usage: "dynamodb: the table (partition key \"pk\", a String)", need: true},
		{name: "dynamodb-endpoint", env: "KVBREAKER_DYNAMODB_ENDPOINT", usage: "dynamodb: endpoint `URL` override, for DynamoDB Local or dynalite", secret: true, check: checkWith(adapter.CheckHTTPURL, redactURL)},
	},
	usage: "--dynamodb-table kvbreaker [--dynamodb-endpoint http://localhost:8000]",
	envHelp: `  AWS_REGION, AWS_PROFILE, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, ...
                 DynamoDB's region and credentials: the AWS SDK's default chain
                 (environment, shared config and credentials files, SSO, instance role)
`,
	secretEnv:  []string{"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID"},
	open:       openDynamoDB,
	leftBehind: "records expire within 10 minutes; the items become eligible for DynamoDB's TTL deletion " + dynamodb.DefaultPurgeDelay.String() + " later (dynamodb.DefaultPurgeDelay), and it deletes them within days",
	create:     initDynamoDB,
	creates:    "DynamoDB's table (--dynamodb-table, partition key \"pk\", on-demand, TTL on \"purgeAt\": dynamodb.CreateTable)",
	prints:     "the AWS CLI commands with DynamoDB's tables' JSON",
	script: func(f *backendFlags) (string, error) {
		return dynamodb.CLIScript(f.get("dynamodb-table"), f.get("dynamodb-endpoint"))
	},
	example:    "--dynamodb-table kvbreaker",
	exampleEnv: "AWS_REGION=eu-west-1",
	examples:   map[string]string{"init": "  kvbreaker init --backend dynamodb --dynamodb-table kvbreaker --print"},
}

// openDynamoDB opens the table (dynamodb.Dial: it fails here, with one
// clear error, if the table is missing or the credentials are refused).
func openDynamoDB(ctx context.Context, f *backendFlags) (*conn, error) {
	return opened(dynamodb.Dial(ctx, f.get("dynamodb-table"), f.get("dynamodb-endpoint")))
}

// initDynamoDB creates the table (dynamodb.Prepare) unless it exists,
// waiting until it is ACTIVE, and enables TTL on it.
func initDynamoDB(ctx context.Context, f *backendFlags) (initOutput, error) {
	client, err := dynamodb.NewClient(ctx, f.get("dynamodb-endpoint"))
	if err != nil {
		return initOutput{}, err
	}
	// Prepare's errors name the table, region and endpoint.
	p, err := dynamodb.Prepare(ctx, client, f.get("dynamodb-table"))
	return prepared(ctx, f, p.Target, p, p.Existed, err, func(err error) error { return err })
}
