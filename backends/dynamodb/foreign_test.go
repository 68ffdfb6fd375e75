package dynamodb_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

// The tests in this file plant items no Breaker wrote (foreignShapes, with
// a raw PutItem and no purgeAt) at a store's keys: the adapter must read
// each as a value with a version that names exactly that item, and a write
// with that version must replace exactly that item.

// TestForeignItemReadsAsValueAndIsReplaced: Get returns an undecodable value
// and a version every worker computes alike; CompareAndSwap with it replaces
// the item with one of the adapter's (numeric ver, expiresAt and purgeAt);
// CompareAndDelete with it deletes it. A Get that returned "malformed item"
// would leave such an item in the way for good: no worker could replace it.
func TestForeignItemReadsAsValueAndIsReplaced(t *testing.T) {
	ctx := t.Context()
	prefix := uniquePrefix(t)
	s := newPrefixed(t, client, prefix)
	other := newPrefixed(t, client, prefix) // another worker
	for _, shape := range (&harness{}).ForeignShapes() {
		t.Run(strings.ReplaceAll(shape, " ", "-"), func(t *testing.T) {
			key := strings.ReplaceAll(shape, " ", "-") + ".example"
			planted := time.Now() // the same item both times
			if err := plantForeign(ctx, prefix+key, shape, planted); err != nil {
				t.Fatal(err)
			}
			val, ver, err := s.Get(ctx, key)
			if err != nil || ver == driver.NoVersion {
				t.Fatalf("Get = %q, %d, %v; want a value with a version", val, ver, err)
			}
			if len(val) == 0 || val[0] != 0 || !strings.Contains(string(val), "malformed item") {
				t.Fatalf("Get value %q, want the undecodable value that says why", val)
			}
			if _, ver2, err := other.Get(ctx, key); err != nil || ver2 != ver {
				t.Fatalf("another worker's Get = %d, %v; want the same version %d", ver2, err, ver)
			}
			if keys, _ := backendtest.ListAll(t, s.(driver.Lister), "", 100); !slices.Contains(keys, key) {
				t.Fatalf("List = %q, leaves out %q, which Get returns", keys, key)
			}
			if d, err := s.(driver.ExpiryReader).Expiry(ctx, key); err != nil || (d != driver.NoExpiry && d > 61*time.Minute) {
				t.Fatalf("Expiry = %v, %v", d, err)
			}
			nv, err := s.CompareAndSwap(ctx, key, ver, []byte("record"), time.Minute)
			if err != nil {
				t.Fatalf("CompareAndSwap with Get's version = %v", err)
			}
			got, gv, err := s.Get(ctx, key)
			if err != nil || gv != nv || string(got) != "record" {
				t.Fatalf("after the write, Get = %q, %d, %v; want %q, %d", got, gv, err, "record", nv)
			}
			raw := rawItem(t, prefix+key)
			for _, a := range []string{dynamodb.AttrVersion, dynamodb.AttrExpiresAt, dynamodb.AttrPurgeAt} {
				if _, ok := raw[a].(*types.AttributeValueMemberN); !ok {
					t.Fatalf("after the write the item's %s is %#v, want a number: %v", a, raw[a], raw)
				}
			}
			if d, err := s.(driver.ExpiryReader).Expiry(ctx, key); err != nil || d <= 0 || d > time.Minute+time.Second {
				t.Fatalf("Expiry after a write with TTL 1m = %v, %v", d, err)
			}
			// Planted again, and deleted with its version.
			if err := plantForeign(ctx, prefix+key, shape, planted); err != nil {
				t.Fatal(err)
			}
			if err := s.CompareAndDelete(ctx, key, ver); err != nil {
				t.Fatalf("CompareAndDelete with Get's version = %v", err)
			}
			if _, _, err := s.Get(ctx, key); !errors.Is(err, driver.ErrNotFound) {
				t.Fatalf("after the delete, Get = %v, want ErrNotFound", err)
			}
		})
	}
}

// TestForeignItemChangedIsAConflict: a write with the version Get gave one
// foreign item does not replace another foreign item planted since, even
// one of the same types and sizes: it is a conflict naming the new item.
// The change lands just before the write that names the first item's raw
// attributes, so that condition itself must tell the two apart.
func TestForeignItemChangedIsAConflict(t *testing.T) {
	ctx := t.Context()
	list := func(n string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			dynamodb.AttrVersion: &types.AttributeValueMemberS{Value: "v"},
			dynamodb.AttrRecord: &types.AttributeValueMemberL{Value: []types.AttributeValue{
				&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberN{Value: n}}},
			}},
		}
	}
	set := func(members ...string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{dynamodb.AttrRecord: &types.AttributeValueMemberSS{Value: members}}
	}
	for _, tc := range []struct {
		name         string
		first, later map[string]types.AttributeValue
	}{
		{"nested-number-changed", list("1"), list("2")},
		{"set-member-changed", set("a", "b"), set("a", "c")},
		{"ver-type-changed", map[string]types.AttributeValue{dynamodb.AttrVersion: &types.AttributeValueMemberS{Value: "5"}},
			map[string]types.AttributeValue{dynamodb.AttrVersion: &types.AttributeValueMemberN{Value: "-5"}}},
		{"attribute-added", map[string]types.AttributeValue{},
			map[string]types.AttributeValue{dynamodb.AttrRecord: &types.AttributeValueMemberS{Value: "x"}}},
		{"expiry-passed", map[string]types.AttributeValue{dynamodb.AttrExpiresAt: &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Unix()+3600, 10)}},
			map[string]types.AttributeValue{dynamodb.AttrExpiresAt: &types.AttributeValueMemberN{Value: "5"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := uniquePrefix(t)
			key := tc.name + ".example"
			put := func(av map[string]types.AttributeValue) {
				item := map[string]types.AttributeValue{dynamodb.AttrKey: &types.AttributeValueMemberS{Value: prefix + key}}
				for k, v := range av {
					item[k] = v
				}
				if _, err := client.PutItem(ctx, &dyn.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
					t.Error(err)
				}
			}
			var changed atomic.Int32
			c := newClient(localEndpoint(), func(o *dyn.Options) {
				o.HTTPClient = armingClient{base: http.DefaultClient, arm: func(body []byte) {
					if bytes.Contains(body, []byte("attribute_exists(#pk)")) && changed.Add(1) == 1 {
						put(tc.later)
					}
				}}
			})
			s := newPrefixed(t, c, prefix)
			put(tc.first)
			_, v1, err := s.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.CompareAndSwap(ctx, key, v1, []byte("record"), time.Minute)
			if changed.Load() != 1 {
				t.Fatalf("the write naming the foreign item was sent %d times, want 1 (err %v)", changed.Load(), err)
			}
			_, v2, gerr := s.Get(ctx, key)
			if tc.name == "expiry-passed" {
				if !errors.Is(gerr, driver.ErrNotFound) {
					t.Fatalf("Get = %v, want ErrNotFound", gerr)
				}
				if ce, ok := errors.AsType[*driver.ConflictError](err); !ok || ce.Version != driver.NoVersion {
					t.Fatalf("CompareAndSwap over the expired item = %v; want a conflict naming no version", err)
				}
				return
			}
			if gerr != nil || v2 == v1 {
				t.Fatalf("the later item was replaced: Get = %d, %v", v2, gerr)
			}
			if ce, ok := errors.AsType[*driver.ConflictError](err); !ok || ce.Version != v2 {
				t.Fatalf("CompareAndSwap with the first item's version = %v; want a conflict naming version %d", err, v2)
			}
		})
	}
}

// TestForeignItemExpiredIsAbsent: a foreign item whose numeric expiresAt has
// passed is absent to Get, List and Expiry, and a create replaces it, as
// for the adapter's own items.
func TestForeignItemExpiredIsAbsent(t *testing.T) {
	ctx := t.Context()
	prefix := uniquePrefix(t)
	s := newPrefixed(t, client, prefix)
	const key = "expired-foreign.example"
	_, err := client.PutItem(ctx, &dyn.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		dynamodb.AttrKey:       &types.AttributeValueMemberS{Value: prefix + key},
		dynamodb.AttrExpiresAt: &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Unix()-10, 10) + ".5"},
		dynamodb.AttrRecord:    &types.AttributeValueMemberS{Value: "x"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, key); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("Get = %v, want ErrNotFound", err)
	}
	if _, err := s.(driver.ExpiryReader).Expiry(ctx, key); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("Expiry = %v, want ErrNotFound", err)
	}
	if keys, _ := backendtest.ListAll(t, s.(driver.Lister), "", 100); slices.Contains(keys, key) {
		t.Fatalf("List = %q lists the expired item", keys)
	}
	if _, err := s.CompareAndSwap(ctx, key, driver.NoVersion, []byte("r"), time.Minute); err != nil {
		t.Fatalf("create over the expired foreign item = %v", err)
	}
}

// TestForeignReplaceLostAnswer: the write that replaces a foreign item is
// applied but its answer is lost; the SDK's retry fails its condition on
// the call's own write, which the adapter recognises as its success.
func TestForeignReplaceLostAnswer(t *testing.T) {
	ctx := t.Context()
	p, _ := proxied(t, nil)
	var armed atomic.Bool
	// Arm the proxy just before the write that names the foreign item's
	// raw attributes (its condition begins attribute_exists(#pk)).
	c := newClient("http://"+p.Addr(), func(o *dyn.Options) {
		o.HTTPClient = armingClient{base: http.DefaultClient, arm: func(body []byte) {
			if bytes.Contains(body, []byte("attribute_exists(#pk)")) && armed.CompareAndSwap(false, true) {
				if err := p.DropNextAnswer(ctx); err != nil {
					t.Error(err)
				}
			}
		}}
	})
	prefix := uniquePrefix(t)
	s := newPrefixed(t, c, prefix)
	const key = "lost.example"
	if err := plantForeign(ctx, prefix+key, "no ver", time.Now()); err != nil {
		t.Fatal(err)
	}
	_, ver, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	nv, err := s.CompareAndSwap(ctx, key, ver, []byte("record"), time.Minute)
	if err != nil {
		t.Fatalf("CompareAndSwap whose answer was lost = %v, want its success", err)
	}
	lost(t, p, 1)
	if _, gv, err := s.Get(ctx, key); err != nil || gv != nv {
		t.Fatalf("Get = %d, %v; want the write's version %d", gv, err, nv)
	}
}

// armingClient calls arm with each request's body before sending it.
type armingClient struct {
	base *http.Client
	arm  func(body []byte)
}

func (c armingClient) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		_ = r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(b))
		c.arm(b)
	}
	return c.base.Do(r)
}

// TestBreakerOverForeignItem: over each foreign shape, FailureThreshold
// failures open the circuit (Allow holds) and Reset works. Without the
// foreign-item handling every
// Failure returned "condition failed and the re-read to tell whose write is
// there failed: malformed item", the circuit stayed closed and Reset failed.
func TestBreakerOverForeignItem(t *testing.T) {
	ctx := t.Context()
	prefix := uniquePrefix(t)
	s := newPrefixed(t, client, prefix)
	b, err := kvbreaker.New(s, kvbreaker.Settings{
		FailureThreshold: 3,
		FailureWindow:    time.Minute,
		RecoveryDelay:    time.Minute,
		SkipClockCheck:   true,
		Logger:           slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.WithoutCancel(ctx))
	for _, shape := range (&harness{}).ForeignShapes() {
		t.Run(strings.ReplaceAll(shape, " ", "-"), func(t *testing.T) {
			host := strings.ReplaceAll(shape, " ", "-") + ".example"
			if err := plantForeign(ctx, prefix+host, shape, time.Now()); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if err := b.Failure(ctx, host); err != nil {
					t.Fatalf("Failure #%d over the foreign item = %v", i+1, err)
				}
			}
			if v, err := b.Allow(ctx, host, time.Time{}); err != nil || v.Decision != kvbreaker.Hold {
				t.Fatalf("after 3 failures (threshold 3), Allow = %v, %v; want Hold", v.Decision, err)
			}
			if n, ok := rawItem(t, prefix+host)[dynamodb.AttrPurgeAt].(*types.AttributeValueMemberN); !ok || n.Value == "" {
				t.Fatalf("the Breaker's record has no purgeAt: DynamoDB's TTL would never delete it")
			}
			if err := b.Reset(ctx, host); err != nil {
				t.Fatalf("Reset = %v", err)
			}
			if v, err := b.Allow(ctx, host, time.Time{}); err != nil || v.Decision != kvbreaker.Send {
				t.Fatalf("after Reset, Allow = %v, %v; want Send", v.Decision, err)
			}
			// Reset over the foreign item itself.
			if err := plantForeign(ctx, prefix+host, shape, time.Now()); err != nil {
				t.Fatal(err)
			}
			if err := b.Reset(ctx, host); err != nil {
				t.Fatalf("Reset over the foreign item = %v", err)
			}
		})
	}
}

// TestExpiry: driver.ExpiryReader through kvbreaker.Prefixed, on the store's
// clock: a written key expires at its TTL, rounded up to the second; a
// foreign item at its numeric expiresAt, else at a numeric purgeAt, else
// never (driver.NoExpiry); an absent or deleted key is ErrNotFound.
func TestExpiry(t *testing.T) {
	ctx := t.Context()
	clk := newFakeClock(time.Date(2026, 12, 1, 9, 0, 0, 250_000_000, time.UTC))
	prefix := uniquePrefix(t)
	s := newPrefixed(t, client, prefix, dynamodb.WithClock(clk.Now))
	er := s.(driver.ExpiryReader)
	if _, err := er.Expiry(ctx, "absent.example"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("Expiry of an absent key = %v, want ErrNotFound", err)
	}
	ver, err := s.CompareAndSwap(ctx, "written.example", driver.NoVersion, []byte("r"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := er.Expiry(ctx, "written.example"); err != nil || d != 10750*time.Millisecond {
		t.Fatalf("Expiry after a write with TTL 10s = %v, %v; want 10.75s (ceil to the second)", d, err)
	}
	if err := s.CompareAndDelete(ctx, "written.example", ver); err != nil {
		t.Fatal(err)
	}
	if _, err := er.Expiry(ctx, "written.example"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("Expiry of a deleted key = %v, want ErrNotFound", err)
	}
	now := clk.Now().Unix()
	for _, tc := range []struct {
		name string
		item map[string]types.AttributeValue
		want time.Duration
	}{
		{"no-expiry", map[string]types.AttributeValue{dynamodb.AttrVersion: &types.AttributeValueMemberS{Value: "x"}}, driver.NoExpiry},
		{"purge-only", map[string]types.AttributeValue{dynamodb.AttrPurgeAt: &types.AttributeValueMemberN{Value: strconv.FormatInt(now+100, 10)}}, 99750 * time.Millisecond},
		{"purge-passed", map[string]types.AttributeValue{dynamodb.AttrPurgeAt: &types.AttributeValueMemberN{Value: strconv.FormatInt(now-100, 10)}}, 0},
		{"expiresAt-a-string", map[string]types.AttributeValue{dynamodb.AttrExpiresAt: &types.AttributeValueMemberS{Value: "soon"}}, driver.NoExpiry},
		{"expiresAt-foreign", map[string]types.AttributeValue{dynamodb.AttrExpiresAt: &types.AttributeValueMemberN{Value: strconv.FormatInt(now+20, 10)}}, 19750 * time.Millisecond},
	} {
		item := map[string]types.AttributeValue{dynamodb.AttrKey: &types.AttributeValueMemberS{Value: prefix + tc.name}}
		for k, v := range tc.item {
			item[k] = v
		}
		if _, err := client.PutItem(ctx, &dyn.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
		if d, err := er.Expiry(ctx, tc.name); err != nil || d != tc.want {
			t.Errorf("%s: Expiry = %v, %v; want %v", tc.name, d, err, tc.want)
		}
	}
}
