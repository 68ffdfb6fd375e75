package dynamodb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/kvbreaker/kvbreaker/adapter"
)

// CreateTable makes table ready for a Store, idempotently: it creates it with
// on-demand billing and AttrKey as the String partition key if it does not
// exist, waits until it is ACTIVE, and enables TTL on AttrPurgeAt.
//
// An existing table with another key schema is an error, as is one whose TTL
// is enabled on another attribute (a table has at most one). A server without
// the TTL API (dynalite, some emulators: UnknownOperationException) is
// tolerated: the store filters expired items on read either way, and only
// physical deletion is lost. The wait is bounded by ctx.
func CreateTable(ctx context.Context, client *dyn.Client, table string) error {
	if client == nil || table == "" {
		return errors.New("dynamodb: create table: needs a client and a table name")
	}
	wrap := func(op string, err error) error {
		return fmt.Errorf("dynamodb: create table %s: %s: %w", table, op, err)
	}
	_, err := client.CreateTable(ctx, createTableInput(table))
	if _, exists := errors.AsType[*types.ResourceInUseException](err); err != nil && !exists {
		return wrap("CreateTable", err)
	}
	if err := waitActive(ctx, client, table); err != nil {
		return wrap("DescribeTable", err)
	}
	return enableTTL(ctx, client, table)
}

// waitActive polls DescribeTable until the table is ACTIVE and checks its key
// schema.
func waitActive(ctx context.Context, client *dyn.Client, table string) error {
	delay := 50 * time.Millisecond
	for {
		out, err := client.DescribeTable(ctx, &dyn.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			return err
		}
		td := out.Table
		if !hasOurKey(td) {
			return fmt.Errorf("table exists with another key schema: want %q (S) as the only (HASH) key", AttrKey)
		}
		if td.TableStatus == types.TableStatusActive {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("table is %s: %w", td.TableStatus, ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, 2*time.Second)
	}
}

func hasOurKey(td *types.TableDescription) bool {
	if td == nil || len(td.KeySchema) != 1 || aws.ToString(td.KeySchema[0].AttributeName) != AttrKey ||
		td.KeySchema[0].KeyType != types.KeyTypeHash {
		return false
	}
	for _, d := range td.AttributeDefinitions {
		if aws.ToString(d.AttributeName) == AttrKey {
			return d.AttributeType == types.ScalarAttributeTypeS
		}
	}
	return false
}

// enableTTL turns on TTL deletion by AttrPurgeAt unless it is on already.
func enableTTL(ctx context.Context, client *dyn.Client, table string) error {
	wrap := func(op string, err error) error {
		return fmt.Errorf("dynamodb: create table %s: %s: %w", table, op, err)
	}
	desc, err := client.DescribeTimeToLive(ctx, &dyn.DescribeTimeToLiveInput{TableName: aws.String(table)})
	switch {
	case unknownOperation(err):
		return nil // no TTL API: see the doc comment
	case err != nil:
		return wrap("DescribeTimeToLive", err)
	}
	if d := desc.TimeToLiveDescription; d != nil {
		attr := aws.ToString(d.AttributeName)
		switch d.TimeToLiveStatus {
		case types.TimeToLiveStatusEnabled, types.TimeToLiveStatusEnabling:
			if attr == AttrPurgeAt {
				return nil
			}
			return wrap("TTL", fmt.Errorf("TTL is enabled on attribute %q; a table has one TTL attribute and this store needs %q", attr, AttrPurgeAt))
		case types.TimeToLiveStatusDisabling:
			return wrap("TTL", errors.New("TTL is being disabled; retry when that has finished (up to an hour)"))
		}
	}
	_, err = client.UpdateTimeToLive(ctx, &dyn.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(AttrPurgeAt),
			Enabled:       aws.Bool(true),
		},
	})
	switch {
	case unknownOperation(err):
		return nil
	case err != nil:
		return wrap("UpdateTimeToLive", err)
	}
	return nil
}

// unknownOperation reports whether err says the server lacks the operation.
func unknownOperation(err error) bool {
	ae, ok := errors.AsType[smithy.APIError](err)
	return ok && ae.ErrorCode() == "UnknownOperationException"
}

// createTableInput is the table CreateTable makes: AttrKey as the String
// partition key, on-demand billing.
func createTableInput(table string) *dyn.CreateTableInput {
	return &dyn.CreateTableInput{
		TableName: aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(AttrKey), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema:   []types.KeySchemaElement{{AttributeName: aws.String(AttrKey), KeyType: types.KeyTypeHash}},
		BillingMode: types.BillingModePayPerRequest,
	}
}

// tableName is DynamoDB's rule for table names.
var tableName = regexp.MustCompile(`^[A-Za-z0-9_.-]{3,255}$`)

// TableJSON is the input of the CreateTable and UpdateTimeToLive requests
// CreateTable sends, as the AWS CLI's --cli-input-json takes them (the
// API's own shapes), for an operator who creates the table by hand
// ("aws dynamodb create-table --cli-input-json …"). A name DynamoDB would
// refuse is an error.
func TableJSON(table string) (create, ttl string, err error) {
	if !tableName.MatchString(table) {
		return "", "", fmt.Errorf("dynamodb: table name %q: want 3 to 255 letters, digits, '_', '-' or '.'", table)
	}
	in := createTableInput(table)
	type attr struct {
		AttributeName string
		AttributeType types.ScalarAttributeType
	}
	type key struct {
		AttributeName string
		KeyType       types.KeyType
	}
	c, err := json.Marshal(struct {
		TableName            string
		AttributeDefinitions []attr
		KeySchema            []key
		BillingMode          types.BillingMode
	}{table,
		[]attr{{aws.ToString(in.AttributeDefinitions[0].AttributeName), in.AttributeDefinitions[0].AttributeType}},
		[]key{{aws.ToString(in.KeySchema[0].AttributeName), in.KeySchema[0].KeyType}},
		in.BillingMode})
	if err != nil {
		return "", "", err
	}
	type spec struct {
		AttributeName string
		Enabled       bool
	}
	t, err := json.Marshal(struct {
		TableName               string
		TimeToLiveSpecification spec
	}{table, spec{AttrPurgeAt, true}})
	return string(c), string(t), err
}

// Prepared says what Prepare found and did.
type Prepared struct {
	// Existed: the table was there (Prepare created it otherwise).
	Existed bool
	// Target names the table, its region and endpoint, as Store.String
	// does: "dynamodb table kvbreaker in eu-west-1 at
	// https://dynamodb.eu-west-1.amazonaws.com".
	Target string
}

// Prepare is CreateTable for a tool that prepares the table before a
// fleet starts and says what it did: it looks the table up first and
// reports whether it existed. Errors are CreateTable's, or the look-up's
// ("dynamodb: describe table …"), after the Target they are about; a
// request the context cut short is an *adapter.NoAnswerError naming the
// endpoint.
func Prepare(ctx context.Context, client *dyn.Client, table string) (Prepared, error) {
	p := Prepared{Target: tableAt(client, table)}
	_, err := client.DescribeTable(ctx, &dyn.DescribeTableInput{TableName: aws.String(table)})
	_, missing := errors.AsType[*types.ResourceNotFoundException](err)
	if err != nil && !missing {
		return p, fmt.Errorf("%s: dynamodb: describe table %s: %w", p.Target, table, adapter.NoAnswer("dynamodb", Endpoint(client), err))
	}
	p.Existed = !missing
	if err := CreateTable(ctx, client, table); err != nil {
		return p, fmt.Errorf("%s: %w", p.Target, adapter.NoAnswer("dynamodb", Endpoint(client), err))
	}
	return p, nil
}
