package dynamodb

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestTypeNameIsDynamoDBs: a malformed item's error names an attribute's
// type as DynamoDB does, for every member type of the SDK's union; a type
// outside it (the SDK's unknown member) keeps its Go name, the control that
// the prefix is not merely cut from anything.
func TestTypeNameIsDynamoDBs(t *testing.T) {
	for v, want := range map[types.AttributeValue]string{
		&types.AttributeValueMemberS{}:    "S",
		&types.AttributeValueMemberN{}:    "N",
		&types.AttributeValueMemberB{}:    "B",
		&types.AttributeValueMemberBOOL{}: "BOOL",
		&types.AttributeValueMemberNULL{}: "NULL",
		&types.AttributeValueMemberSS{}:   "SS",
		&types.AttributeValueMemberNS{}:   "NS",
		&types.AttributeValueMemberBS{}:   "BS",
		&types.AttributeValueMemberL{}:    "L",
		&types.AttributeValueMemberM{}:    "M",
		&types.UnknownUnionMember{}:       "*types.UnknownUnionMember",
	} {
		if got := typeName(v); got != want {
			t.Errorf("typeName(%T) = %q, want %q", v, got, want)
		}
	}
}
