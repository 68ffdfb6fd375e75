package dynamodb_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
)

// TestPrepareSaysWhatItDid: Prepare creates a missing table, and finds it
// the second time.
func TestPrepareSaysWhatItDid(t *testing.T) {
	name := fmt.Sprintf("prep-%d", prefixes.Add(1))
	for i, want := range []dynamodb.Prepared{{}, {Existed: true}} {
		got, err := dynamodb.Prepare(t.Context(), client, name)
		if err != nil || got != want {
			t.Fatalf("Prepare #%d = %+v, %v; want %+v", i+1, got, err, want)
		}
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
