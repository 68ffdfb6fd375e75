package dynamodb

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// MaxListLimit is the most items one List call examines.
const MaxListLimit = 1000

// cursorSep separates, in a cursor, the listing prefix from a last key that
// does not begin with it. driver.ValidateKey refuses control characters,
// so no key the Breaker writes (or prefix kvbreaker.Prefixed accepts)
// contains it.
const cursorSep = "\x1f"

// List implements driver.Lister with one consistent Scan per call, filtered
// to keys that begin with prefix and are live by the store's clock, as Get
// judges them: expired items and delete tombstones are not listed; foreign
// items (see the package doc) are, unless their numeric AttrExpiresAt has
// passed, since Get returns them as values. The Scan examines
// at most limit items (at most MaxListLimit), so a page holds up to limit
// keys and may hold none before the end; keys come in the table's order
// (by hash, not sorted).
//
// The cursor is the last key the Scan examined, which a later call passes
// back to DynamoDB as ExclusiveStartKey. A last key that does not begin with
// prefix (the Scan runs over the whole table) is written as prefix, a 0x1f
// byte, and the key, so that every cursor begins with prefix and one from
// another listing can be told apart.
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	if err := s.gate().List(prefix, limit); err != nil {
		return nil, "", err
	}
	start, err := startKey(prefix, cursor)
	if err != nil {
		return nil, "", s.wrap(adapter.OpList, prefix, err)
	}
	names := map[string]string{"#pk": AttrKey, "#exp": AttrExpiresAt}
	values := map[string]types.AttributeValue{
		":now":    &types.AttributeValueMemberN{Value: strconv.FormatInt(s.clock().Unix(), 10)},
		":number": &types.AttributeValueMemberS{Value: "N"},
	}
	// Live as Get judges it: now < expiresAt (a tombstone's is 0), or no
	// numeric expiresAt at all (a foreign item, which never expires).
	filter := "(#exp > :now OR NOT attribute_type(#exp, :number))"
	if prefix != "" {
		values[":prefix"] = &types.AttributeValueMemberS{Value: prefix}
		filter = "begins_with(#pk, :prefix) AND " + filter
	}
	in := &dyn.ScanInput{
		TableName:                 aws.String(s.table),
		ConsistentRead:            aws.Bool(true),
		Limit:                     aws.Int32(int32(min(limit, MaxListLimit))),
		ProjectionExpression:      aws.String("#pk"),
		FilterExpression:          aws.String(filter),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}
	if start != "" {
		in.ExclusiveStartKey = keyAttr(start)
	}
	out, err := s.client.Scan(ctx, in, s.failFast)
	if err != nil {
		return nil, "", s.wrap(adapter.OpList, prefix, err)
	}
	keys := make([]string, 0, len(out.Items))
	for _, it := range out.Items {
		if k, ok := it[AttrKey].(*types.AttributeValueMemberS); ok {
			keys = append(keys, k.Value)
		}
	}
	var next string
	if last, ok := out.LastEvaluatedKey[AttrKey].(*types.AttributeValueMemberS); ok {
		next = last.Value
		if !strings.HasPrefix(next, prefix) || strings.Contains(next, cursorSep) {
			next = prefix + cursorSep + next
		}
	}
	return keys, next, nil
}

var _ driver.Lister = (*Store)(nil)

// startKey returns the key a cursor of List(prefix, …) resumes after.
func startKey(prefix, cursor string) (string, error) {
	p, key, tagged := strings.Cut(cursor, cursorSep)
	if !tagged {
		return cursor, nil
	}
	if p != prefix {
		return "", fmt.Errorf("cursor %q belongs to a listing of prefix %q, not %q", cursor, p, prefix)
	}
	return key, nil
}
