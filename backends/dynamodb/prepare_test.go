package dynamodb_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
)

// TestPrepareSaysWhatItDid: Prepare creates a missing table, and finds it
// the second time; each time it names the table, region and endpoint as
// a Store over it does.
func TestPrepareSaysWhatItDid(t *testing.T) {
	name := fmt.Sprintf("prep-%d", prefixes.Add(1))
	target := "dynamodb table " + name + " in us-east-1 at " + localEndpoint()
	for i, want := range []dynamodb.Prepared{{Target: target}, {Existed: true, Target: target}} {
		got, err := dynamodb.Prepare(t.Context(), client, name)
		if err != nil || got != want {
			t.Fatalf("Prepare #%d = %+v, %v; want %+v", i+1, got, err, want)
		}
	}
}

// TestPrepareErrorsNameTheTarget: Prepare refuses a table with another key
// schema in an error that begins with the table, region and endpoint,
// which CreateTable's own error does not name.
func TestPrepareErrorsNameTheTarget(t *testing.T) {
	name := fmt.Sprintf("other-key-%d", prefixes.Add(1))
	_, err := client.CreateTable(t.Context(), &dyn.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	target := "dynamodb table " + name + " in us-east-1 at " + localEndpoint()
	p, err := dynamodb.Prepare(t.Context(), client, name)
	if err == nil || !strings.HasPrefix(err.Error(), target+": ") || !strings.Contains(err.Error(), "another key schema") || p.Target != target {
		t.Errorf("Prepare(table keyed by id) = %+v, %v; want an error beginning %q", p, err, target+": ")
	}
	if err := dynamodb.CreateTable(t.Context(), client, name); err == nil || strings.Contains(err.Error(), target) {
		t.Errorf("CreateTable(table keyed by id) = %v; want its error without the target, which only Prepare adds", err)
	}
}

// TestTableJSONIsTheTableCreateTableMakes: TableJSON's create input names
// the table, AttrKey as its only (HASH, String) key and on-demand billing,
// its TTL input AttrPurgeAt; a name DynamoDB refuses is an error.
func TestTableJSONIsTheTableCreateTableMakes(t *testing.T) {
	create, ttl, err := dynamodb.TableJSON("breakers")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		TableName            string
		AttributeDefinitions []struct{ AttributeName, AttributeType string }
		KeySchema            []struct{ AttributeName, KeyType string }
		BillingMode          string
	}
	var l struct {
		TableName               string
		TimeToLiveSpecification struct {
			AttributeName string
			Enabled       bool
		}
	}
	if err := json.Unmarshal([]byte(create), &c); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(ttl), &l); err != nil {
		t.Fatal(err)
	}
	if c.TableName != "breakers" || len(c.KeySchema) != 1 || c.KeySchema[0].AttributeName != dynamodb.AttrKey || c.KeySchema[0].KeyType != "HASH" ||
		len(c.AttributeDefinitions) != 1 || c.AttributeDefinitions[0].AttributeType != "S" || c.BillingMode != "PAY_PER_REQUEST" {
		t.Errorf("create input %s", create)
	}
	if l.TableName != "breakers" || l.TimeToLiveSpecification.AttributeName != dynamodb.AttrPurgeAt || !l.TimeToLiveSpecification.Enabled {
		t.Errorf("TTL input %s", ttl)
	}
	for _, bad := range []string{"ab", "no spaces", string(make([]byte, 256))} {
		if _, _, err := dynamodb.TableJSON(bad); err == nil {
			t.Errorf("TableJSON(%q) took a name DynamoDB refuses", bad)
		}
	}
}
