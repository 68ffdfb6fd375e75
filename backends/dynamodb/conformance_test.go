package dynamodb_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/skew"
)

// harness makes stores over the shared dynalite table, each under a key
// prefix no other store uses, through a fault proxy (AnswerDropper; the
// client keeps the SDK's standard retryer, which retries a write whose
// answer was lost). Expiry is judged by the adapter's clock (dynalite
// deletes nothing), so Advance moves that clock (TimeAdvancer), and a
// skewed reader is a store on the same prefix with its clock offset
// (SkewedStoreMaker). Lifetime reads the purge attribute, the physical
// expiry DynamoDB's TTL acts on (LifetimeReporter).
type harness struct {
	t      *testing.T
	proxy  *faultproxy.Proxy
	client *dyn.Client // through the proxy

	mu       sync.Mutex
	off      time.Duration
	prefixes map[driver.Store]string
}

func newHarness(_ context.Context, t *testing.T) (conformance.Harness, error) {
	p, err := faultproxy.Start(srv.Addr())
	if err != nil {
		return nil, err
	}
	return &harness{t: t, proxy: p, client: newClient("http://" + p.Addr()), prefixes: map[driver.Store]string{}}, nil
}

func (h *harness) now() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return time.Now().Add(h.off)
}

func (h *harness) store(prefix string, clock func() time.Time) (driver.Store, error) {
	st, err := dynamodb.New(h.client, table, dynamodb.WithClock(clock))
	if err != nil {
		return nil, err
	}
	s, err := kvbreaker.Prefixed(st, prefix)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.prefixes[s] = prefix
	h.mu.Unlock()
	return s, nil
}

func (h *harness) MakeStore(context.Context) (driver.Store, error) {
	return h.store(uniquePrefix(h.t), h.now)
}

// Close stops the proxy, saying how many answers it lost (the lost-answer
// cases prove nothing if it lost none); the table and server belong to
// TestMain.
func (h *harness) Close() {
	h.t.Logf("fault proxy: %+v", h.proxy.Stats())
	_ = h.proxy.Close()
}

func (h *harness) Describe() string {
	return fmt.Sprintf("DynamoDB table %q at %s (through a fault proxy at %s)", table, srv.Endpoint, h.proxy.Addr())
}

func (h *harness) Advance(_ context.Context, d time.Duration) error {
	h.mu.Lock()
	h.off += d
	h.mu.Unlock()
	return nil
}

func (h *harness) MakeSkewedStore(_ context.Context, s driver.Store, offset time.Duration) (driver.Store, error) {
	h.mu.Lock()
	prefix, ok := h.prefixes[s]
	h.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("not a store of this harness: %T", s)
	}
	return h.store(prefix, func() time.Time { return h.now().Add(offset) })
}

func (h *harness) DropNextAnswer(ctx context.Context) error {
	return h.proxy.DropNextAnswer(ctx)
}

// Lifetime is the item's purge attribute (epoch seconds, on AWS's clock,
// which here is the harness's) minus now.
func (h *harness) Lifetime(ctx context.Context, s driver.Store, key string) (time.Duration, error) {
	h.mu.Lock()
	prefix, ok := h.prefixes[s]
	h.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("not a store of this harness: %T", s)
	}
	out, err := client.GetItem(ctx, &dyn.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]types.AttributeValue{dynamodb.AttrKey: &types.AttributeValueMemberS{Value: prefix + key}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return 0, err
	}
	if out.Item == nil {
		return 0, driver.ErrNotFound
	}
	n, ok := out.Item[dynamodb.AttrPurgeAt].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("%q has no %s number attribute: DynamoDB's TTL never deletes it", key, dynamodb.AttrPurgeAt)
	}
	sec, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, err
	}
	return time.Unix(sec, 0).Sub(h.now()), nil
}

func TestConformance(t *testing.T) {
	conformance.Run(t, newHarness)
}

// TestDefaultTraitsMatchSkewProfile: a Store with default options declares
// DefaultTraits, and skew's DynamoDB profile, on which the margin
// experiments run, equals them: a hand copy of the profile would drift
// (lose the purge delay's MaxClockSkew, say) with nothing comparing the
// two.
func TestDefaultTraitsMatchSkewProfile(t *testing.T) {
	s, err := dynamodb.New(client, table)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Traits(), dynamodb.DefaultTraits(); got != want {
		t.Errorf("Traits() with default options = %+v, but DefaultTraits() = %+v: update DefaultTraits", got, want)
	}
	if got, want := dynamodb.DefaultTraits(), skew.DynamoDB.Traits; got != want {
		t.Errorf("dynamodb.DefaultTraits() = %+v, but skew.DynamoDB declares %+v: update the profile", got, want)
	}
}

// foreignShapes are the items PlantForeign writes with a raw PutItem: what
// other software, an older adapter or a hand edit leaves at a key. None has
// a purge attribute, so DynamoDB's TTL would never delete it.
var foreignShapes = map[string]func(now time.Time) map[string]types.AttributeValue{
	"no ver": func(now time.Time) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{dynamodb.AttrExpiresAt: epoch(now.Add(time.Hour)), dynamodb.AttrRecord: &types.AttributeValueMemberB{Value: []byte{1, 0, 0}}}
	},
	"ver a string": func(now time.Time) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{dynamodb.AttrVersion: &types.AttributeValueMemberS{Value: "7"}, dynamodb.AttrExpiresAt: epoch(now.Add(time.Hour))}
	},
	"ver 0": func(now time.Time) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{dynamodb.AttrVersion: &types.AttributeValueMemberN{Value: "0"}, dynamodb.AttrExpiresAt: epoch(now.Add(time.Hour))}
	},
	"ver negative": func(now time.Time) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{dynamodb.AttrVersion: &types.AttributeValueMemberN{Value: "-5"}, dynamodb.AttrExpiresAt: epoch(now.Add(time.Hour))}
	},
	"ver a fraction": func(now time.Time) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{dynamodb.AttrVersion: &types.AttributeValueMemberN{Value: "1.5"}, dynamodb.AttrExpiresAt: epoch(now.Add(time.Hour))}
	},
	"rec a string": func(now time.Time) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{dynamodb.AttrVersion: &types.AttributeValueMemberN{Value: "42"}, dynamodb.AttrExpiresAt: epoch(now.Add(time.Hour)), dynamodb.AttrRecord: &types.AttributeValueMemberS{Value: "garbage"}}
	},
	"rec a list": func(now time.Time) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{dynamodb.AttrVersion: &types.AttributeValueMemberN{Value: "43"}, dynamodb.AttrExpiresAt: epoch(now.Add(time.Hour)), dynamodb.AttrRecord: &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberN{Value: "1"}, &types.AttributeValueMemberBOOL{Value: true}}}}
	},
	"rec a nested map": func(now time.Time) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{dynamodb.AttrVersion: &types.AttributeValueMemberN{Value: "47"}, dynamodb.AttrExpiresAt: epoch(now.Add(time.Hour)), dynamodb.AttrRecord: &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"a":        &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberN{Value: "1"}, &types.AttributeValueMemberSS{Value: []string{"x", "y"}}}},
			"b c":      &types.AttributeValueMemberNULL{Value: true},
			"d.e":      &types.AttributeValueMemberBOOL{Value: false},
			"bytes":    &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2, 3}}},
			"numbers":  &types.AttributeValueMemberNS{Value: []string{"1", "2.5"}},
			"no-ascii": &types.AttributeValueMemberS{Value: "é"},
		}}}
	},
	"ver a bool": func(now time.Time) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{dynamodb.AttrVersion: &types.AttributeValueMemberBOOL{Value: true}, dynamodb.AttrExpiresAt: epoch(now.Add(time.Hour))}
	},
	"expiresAt a string": func(now time.Time) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{dynamodb.AttrVersion: &types.AttributeValueMemberN{Value: "44"}, dynamodb.AttrExpiresAt: &types.AttributeValueMemberS{Value: "tomorrow"}}
	},
	"expiresAt a fraction": func(now time.Time) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{dynamodb.AttrVersion: &types.AttributeValueMemberN{Value: "45"}, dynamodb.AttrExpiresAt: &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(time.Hour).Unix(), 10) + ".5"}}
	},
	"no expiresAt": func(time.Time) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{dynamodb.AttrVersion: &types.AttributeValueMemberN{Value: "46"}, dynamodb.AttrRecord: &types.AttributeValueMemberB{Value: []byte{1, 0, 0}}}
	},
	"pk only": func(time.Time) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{}
	},
	"other attributes only": func(time.Time) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"owner": &types.AttributeValueMemberS{Value: "someone else"}, "n": &types.AttributeValueMemberNULL{Value: true}}
	},
}

func epoch(t time.Time) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(t.Unix(), 10)}
}

// ForeignShapes implements conformance.ForeignPlanter.
func (h *harness) ForeignShapes() []string { return slices.Sorted(maps.Keys(foreignShapes)) }

// PlantForeign implements conformance.ForeignPlanter with a raw PutItem
// (no purge attribute) at the key under s's prefix.
func (h *harness) PlantForeign(ctx context.Context, s driver.Store, key, shape string) error {
	h.mu.Lock()
	prefix, ok := h.prefixes[s]
	h.mu.Unlock()
	if !ok {
		return fmt.Errorf("not a store of this harness: %T", s)
	}
	return plantForeign(ctx, prefix+key, shape, h.now())
}

// plantForeign stores shape at the table's key full with a raw PutItem.
func plantForeign(ctx context.Context, full, shape string, now time.Time) error {
	mk, ok := foreignShapes[shape]
	if !ok {
		return fmt.Errorf("no foreign shape %q", shape)
	}
	av := mk(now)
	av[dynamodb.AttrKey] = &types.AttributeValueMemberS{Value: full}
	_, err := client.PutItem(ctx, &dyn.PutItemInput{TableName: aws.String(table), Item: av})
	return err
}
