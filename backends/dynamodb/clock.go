package dynamodb

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

var _ driver.ClockSampler = (*Store)(nil)

// clockKey is the key SampleClock reads. Its control character fails
// driver.ValidateKey, so no Breaker ever writes an item under it and the
// read stays the cheapest one DynamoDB bills.
const clockKey = "\x7fkvbreaker-clock-sample"

// SampleClock implements driver.ClockSampler from the HTTP Date header of
// one eventually consistent GetItem of a key that cannot exist, truncated
// to the second (resolution 1 s).
//
// Why GetItem: it needs only the dynamodb:GetItem permission the store
// already has, and it is a data-plane call that scales with the table. It
// costs 0.5 read capacity units (an absent item is billed as one of up to
// 4 KB, read eventually consistently): a sample a minute per worker is
// about 22,000 units a month. DescribeTable consumes no capacity, but it is
// a control-plane call with a low per-account rate limit that a fleet of
// workers sampling would share, and it needs a permission workers
// otherwise do without.
//
// A retried attempt's Date is the last attempt's: still within the call the
// caller timed. An answer without a Date header, or with one that does not
// parse as an HTTP date, is an error, never a zero time.
func (s *Store) SampleClock(ctx context.Context) (time.Time, time.Duration, error) {
	if s.closed.Load() {
		return time.Time{}, 0, s.wrap(adapter.OpClock, "", ErrClosed)
	}
	out, err := s.client.GetItem(ctx, &dyn.GetItemInput{
		TableName:            aws.String(s.table),
		Key:                  keyAttr(clockKey),
		ConsistentRead:       aws.Bool(false),
		ProjectionExpression: aws.String(AttrKey),
	}, s.failFast)
	if err != nil {
		return time.Time{}, 0, s.wrap(adapter.OpClock, "", err)
	}
	raw, ok := awsmiddleware.GetRawResponse(out.ResultMetadata).(*smithyhttp.Response)
	if !ok || raw.Response == nil {
		return time.Time{}, 0, s.wrap(adapter.OpClock, "", fmt.Errorf("no HTTP response in the SDK's metadata (%T)", awsmiddleware.GetRawResponse(out.ResultMetadata)))
	}
	t, err := dateHeader(raw.Header)
	if err != nil {
		return time.Time{}, 0, s.wrap(adapter.OpClock, "", fmt.Errorf("%w from %s", err, s.endpoint))
	}
	return t, time.Second, nil
}

// dateHeader parses an answer's Date header in any of the formats HTTP
// allows (RFC 9110 §5.6.7).
func dateHeader(h http.Header) (time.Time, error) {
	v := h.Values("Date")
	if len(v) == 0 || v[0] == "" {
		return time.Time{}, fmt.Errorf("no Date header in the answer")
	}
	t, err := http.ParseTime(v[0])
	if err != nil {
		return time.Time{}, fmt.Errorf("unparsable Date header %q in the answer", v[0])
	}
	return t, nil
}
