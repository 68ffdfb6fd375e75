package dynamodb_test

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
)

// A worker whose clock is a year fast opens a host's circuit, and its
// store writes expiresAt and purgeAt a year ahead too. A correct worker
// holds the host no longer than RecoveryDelay + 2×ClockSkew, and its write
// brings the item's expiry back to its own StateTTL: without it fresh
// messages would be held for a year.
func TestFastClockWriterItemExpiry(t *testing.T) {
	ctx := t.Context()
	const host = "fast.example"
	truth := newFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	fastNow := func() time.Time { return truth.Now().Add(365 * 24 * time.Hour) }
	prefix := uniquePrefix(t)
	s := kvbreaker.Settings{SkipClockCheck: true, Logger: slog.New(slog.DiscardHandler)}
	fs := s
	fs.Clock = fastNow
	fast, err := kvbreaker.New(newPrefixed(t, client, prefix, dynamodb.WithClock(fastNow)), fs)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close(ctx)
	for range 5 {
		if err := fast.Failure(ctx, host); err != nil {
			t.Fatal(err)
		}
	}
	cs := s
	cs.Clock = truth.Now
	b, err := kvbreaker.New(newPrefixed(t, client, prefix, dynamodb.WithClock(truth.Now)), cs)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	now := truth.Now()
	v, err := b.Allow(ctx, host, time.Time{})
	if err != nil || v.Decision != kvbreaker.Hold {
		t.Fatalf("Allow = %+v, %v; want Hold", v, err)
	}
	d := kvbreaker.Settings{}.WithDefaults()
	if lim := now.Add(d.RecoveryDelay + 2*d.ClockSkew); v.RetryAt.After(lim) {
		t.Fatalf("held until %v, %v away; want at most RecoveryDelay + 2×ClockSkew", v.RetryAt, v.RetryAt.Sub(now))
	}
	out, err := client.GetItem(ctx, &dyn.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]types.AttributeValue{dynamodb.AttrKey: &types.AttributeValueMemberS{Value: prefix + host}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, attr := range []string{dynamodb.AttrExpiresAt, dynamodb.AttrPurgeAt} {
		n, ok := out.Item[attr].(*types.AttributeValueMemberN)
		if !ok {
			t.Fatalf("item %v has no number %s", out.Item, attr)
		}
		sec, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		// purgeAt adds the purge delay (an hour by default) to expiresAt.
		if at, lim := time.Unix(sec, 0), now.Add(b.StateTTL()+dynamodb.DefaultPurgeDelay+time.Second); at.After(lim) {
			t.Fatalf("%s is %v, %v from now: the fast writer's expiry stands (want at most StateTTL %v, plus the purge delay for purgeAt)", attr, at, at.Sub(now), b.StateTTL())
		}
	}
}
