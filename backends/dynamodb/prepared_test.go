package dynamodb_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
)

// TestPreparedSaysWhatItDid: the first Prepare says it created the table
// with the partition key and billing the server then describes; the
// second says it found it.
func TestPreparedSaysWhatItDid(t *testing.T) {
	name := fmt.Sprintf("said-%d", prefixes.Add(1))
	p, err := dynamodb.Prepare(t.Context(), client, name)
	if err != nil {
		t.Fatal(err)
	}
	d, err := client.DescribeTable(t.Context(), &dyn.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	key := aws.ToString(d.Table.KeySchema[0].AttributeName)
	billing := d.Table.BillingModeSummary != nil && d.Table.BillingModeSummary.BillingMode == "PAY_PER_REQUEST"
	if !strings.HasPrefix(p.String(), `created (partition key "`+key+`", on-demand billing`) || !billing {
		t.Errorf("first Prepare says %q; the server has key %q, on-demand billing %v", p, key, billing)
	}
	if p, err := dynamodb.Prepare(t.Context(), client, name); err != nil || !strings.HasPrefix(p.String(), "exists already") {
		t.Errorf("second Prepare: %q, %v", p, err)
	}
}
