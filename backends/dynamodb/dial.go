package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// ErrNoTable is matched (errors.Is) by Dial's error when the table does
// not exist; the error names the table, the region and the endpoint. It is
// adapter.ErrNoTable, which every backend's missing table matches.
var ErrNoTable = adapter.ErrNoTable

// noTable is Dial's error for a missing table: it reads as its message
// alone and matches ErrNoTable.
type noTable string

func (e noTable) Error() string      { return string(e) }
func (noTable) Is(target error) bool { return target == ErrNoTable }

// NewClient makes the client Dial uses: the AWS SDK's default
// configuration (region and credentials from the environment, the shared
// config and credentials files, SSO or an instance role), talking to
// endpoint when it is not "" (DynamoDB Local, dynalite). A connection to
// that endpoint is tried first, within 2 s, so that a closed port fails at
// once as a *driver.UnreachableError instead of after the SDK's retries; AWS's
// own endpoints resolve and answer, and are not tried.
func NewClient(ctx context.Context, endpoint string) (*dyn.Client, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("dynamodb: loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("dynamodb: no AWS region: set AWS_REGION, or a region in the profile AWS_PROFILE names")
	}
	if endpoint != "" {
		if err := adapter.CheckDialURL(ctx, "dynamodb", endpoint, 2*time.Second); err != nil {
			return nil, err
		}
	}
	return dyn.NewFromConfig(cfg, func(o *dyn.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}), nil
}

// Dial opens a Store over table with a client of its own (NewClient), and
// describes the table first, so that refused credentials fail here and a
// missing table with an error matching ErrNoTable. When ctx ends before
// DynamoDB answers, the error is a *driver.UnreachableError naming the endpoint.
func Dial(ctx context.Context, table, endpoint string, opts ...Option) (*Store, error) {
	client, err := NewClient(ctx, endpoint)
	if err != nil {
		return nil, err
	}
	where := Endpoint(client)
	if _, err := client.DescribeTable(ctx, &dyn.DescribeTableInput{TableName: aws.String(table)}); err != nil {
		if ctx.Err() != nil {
			return nil, &driver.UnreachableError{Backend: "dynamodb", Endpoints: []string{where}, Reason: "no answer before the context ended", Err: err}
		}
		if nf, ok := errors.AsType[*types.ResourceNotFoundException](err); ok {
			return nil, noTable(fmt.Sprintf("dynamodb: table %s does not exist in %s at %s (%s)", table, client.Options().Region, where, nf.ErrorCode()))
		}
		return nil, fmt.Errorf("dynamodb: describe table %s at %s: %w", table, where, err)
	}
	return New(client, table, opts...)
}

// Endpoint is where client sends its requests, for messages: its endpoint
// override without user information, query or fragment, or the region's
// AWS endpoint.
func Endpoint(client *dyn.Client) string {
	if ep := aws.ToString(client.Options().BaseEndpoint); ep != "" {
		return adapter.ShownURL(ep)
	}
	return "https://dynamodb." + client.Options().Region + ".amazonaws.com"
}

// String names the table, its region and endpoint (Endpoint), for a
// tool's output or a log: "dynamodb table kvbreaker in eu-west-1 at
// https://dynamodb.eu-west-1.amazonaws.com", as Dial's errors do.
func (s *Store) String() string { return tableAt(s.client, s.table) }

// tableAt names table as Store.String does.
func tableAt(client *dyn.Client, table string) string {
	return "dynamodb table " + table + " in " + client.Options().Region + " at " + Endpoint(client)
}

// Client is the DynamoDB client the Store sends its requests through.
func (s *Store) Client() *dyn.Client { return s.client }
