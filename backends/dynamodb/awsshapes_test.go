package dynamodb_test

// The tests in this file run the adapter against an HTTP server on 127.0.0.1
// that answers with DynamoDB responses CONSTRUCTED BY HAND from the AWS
// documentation (the DynamoDB API reference's error shapes, the "Error
// handling with DynamoDB" page's example bodies, and the
// ReturnValuesOnConditionCheckFailure member of
// ConditionalCheckFailedException). They are not captured from the live
// service. They cover what dynalite cannot: the old item returned with a
// failed condition, throttling errors, and the TTL API.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/driver"
)

// awsReply is one HTTP response in DynamoDB's JSON 1.0 protocol.
type awsReply struct {
	status int
	body   string
}

func ok(body string) awsReply { return awsReply{http.StatusOK, body} }

// awsError builds an error body as the service sends it: "__type" is the
// namespaced error code, "message" the text.
func awsError(typ, message string, extra string) awsReply {
	body := fmt.Sprintf(`{"__type":%q,"message":%q%s}`, typ, message, extra)
	return awsReply{http.StatusBadRequest, body}
}

const (
	nsDynamo = "com.amazonaws.dynamodb.v20120810#"
	// Message texts as the AWS documentation gives them.
	msgConditional = "The conditional request failed"
	msgThroughput  = "You exceeded your maximum allowed provisioned throughput for a table or for one or more global secondary indexes. To view performance metrics for provisioned throughput vs. consumed throughput, open the Amazon CloudWatch console."
	msgThrottling  = "Rate of requests exceeds the allowed throughput."
)

// awsRequest is what the fake service received.
type awsRequest struct {
	op   string // X-Amz-Target without the API version
	body map[string]any
}

// fakeAWS answers each operation from its script, in order; the last reply
// of a script repeats.
type fakeAWS struct {
	mu     sync.Mutex
	script map[string][]awsReply
	got    []awsRequest
	// reply, if set, answers instead of the script when it returns true:
	// it sees every request received so far (the last is the current one).
	reply func(got []awsRequest) (awsReply, bool)
}

func (f *fakeAWS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	f.mu.Lock()
	f.got = append(f.got, awsRequest{op, body})
	replies := f.script[op]
	var rep awsReply
	custom, isCustom := awsReply{}, false
	if f.reply != nil {
		custom, isCustom = f.reply(f.got)
	}
	switch {
	case isCustom:
		rep = custom
	case len(replies) == 0:
		rep = awsError("com.amazon.coral.service#UnknownOperationException", "", "")
	case len(replies) == 1:
		rep = replies[0]
	default:
		rep, f.script[op] = replies[0], replies[1:]
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("x-amzn-RequestId", "RECORDEDSHAPE0000000000000000000000000000000000000")
	// The SDK verifies this checksum of the body, as the service sends it.
	w.Header().Set("x-amz-crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(rep.body))), 10))
	w.WriteHeader(rep.status)
	_, _ = io.WriteString(w, rep.body)
}

func (f *fakeAWS) ops() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ops []string
	for _, r := range f.got {
		ops = append(ops, r.op)
	}
	return ops
}

func (f *fakeAWS) request(i int) awsRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.got[i]
}

// newFakeAWS serves script on 127.0.0.1 and returns a client for it with a
// fast retry backoff (users configure their own retryer).
func newFakeAWS(t *testing.T, script map[string][]awsReply, opts ...func(*dyn.Options)) (*fakeAWS, *dyn.Client) {
	t.Helper()
	return newFakeAWSB(t, script, opts...)
}

func newFakeAWSB(t testing.TB, script map[string][]awsReply, opts ...func(*dyn.Options)) (*fakeAWS, *dyn.Client) {
	t.Helper()
	f := &fakeAWS{script: script}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	fast := func(o *dyn.Options) {
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = 3
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
		})
	}
	return f, newClient(srv.URL, append([]func(*dyn.Options){fast}, opts...)...)
}

// itemJSON is a host item in DynamoDB JSON.
func itemJSON(key string, val []byte, ver driver.Version, expiresAt int64) string {
	return fmt.Sprintf(`{"pk":{"S":%q},"rec":{"B":%q},"ver":{"N":"%d"},"expiresAt":{"N":"%d"},"purgeAt":{"N":"%d"}}`,
		key, base64.StdEncoding.EncodeToString(val), ver, expiresAt, expiresAt+3600)
}

func conditionalFailed(item string) awsReply {
	extra := ""
	if item != "" {
		extra = `,"Item":` + item
	}
	return awsError(nsDynamo+"ConditionalCheckFailedException", msgConditional, extra)
}

func TestAWSShapes(t *testing.T) {
	clk := newFakeClock(time.Date(2026, 11, 30, 9, 0, 0, 500_000_000, time.UTC))
	now := clk.Now().Unix()
	live := itemJSON("h.example", []byte("current"), 77, now+100)
	expired := itemJSON("h.example", []byte("old"), 66, now)
	for _, tc := range []struct {
		name    string
		script  map[string][]awsReply
		call    func(context.Context, driver.Store) error
		check   func(*testing.T, error)
		wantOps []string
	}{
		{
			name:   "put-conflict-returns-old-item-without-a-read",
			script: map[string][]awsReply{"UpdateItem": {conditionalFailed(live)}},
			call:   casCall(5),
			check: func(t *testing.T, err error) {
				mustConflict(t, err, []byte("current"), 77)
			},
			wantOps: []string{"UpdateItem"},
		},
		{
			name:   "put-conflict-old-item-expired-counts-as-absent",
			script: map[string][]awsReply{"UpdateItem": {conditionalFailed(expired)}},
			call:   casCall(66),
			check: func(t *testing.T, err error) {
				mustConflict(t, err, nil, driver.NoVersion)
			},
			wantOps: []string{"UpdateItem"},
		},
		{
			name: "put-conflict-without-item-rereads-consistently",
			// DynamoDB sends no Item when there was none; so does dynalite
			// always. Either way the adapter reads.
			script: map[string][]awsReply{"UpdateItem": {conditionalFailed("")}, "GetItem": {ok(`{}`)}},
			call:   casCall(5),
			check: func(t *testing.T, err error) {
				mustConflict(t, err, nil, driver.NoVersion)
			},
			wantOps: []string{"UpdateItem", "GetItem"},
		},
		{
			name: "create-conflict-then-absent-on-reread-is-a-bare-conflict",
			// The create failed, then the key was deleted before the
			// re-read: "conflict, currently absent" would contradict the
			// failure, so no current value is claimed.
			script: map[string][]awsReply{"UpdateItem": {conditionalFailed("")}, "GetItem": {ok(`{}`)}},
			call:   casCall(driver.NoVersion),
			check: func(t *testing.T, err error) {
				if !errors.Is(err, driver.ErrConflict) {
					t.Fatalf("err = %v, want a conflict", err)
				}
				if ce, isCE := errors.AsType[*driver.ConflictError](err); isCE {
					t.Fatalf("conflict claims the key holds version %d", ce.Version)
				}
				if _, ok := errors.AsType[*types.ConditionalCheckFailedException](err); !ok {
					t.Fatalf("err = %v: SDK error lost", err)
				}
			},
			wantOps: []string{"UpdateItem", "GetItem"},
		},
		{
			// A foreign item (here: no ver, no expiresAt) is the key's
			// current value: a conflict names it with the version Get
			// gives it, so the caller's next write can replace it.
			name:   "put-conflict-foreign-old-item-is-a-conflict-naming-it",
			script: map[string][]awsReply{"UpdateItem": {conditionalFailed(`{"pk":{"S":"h.example"}}`)}},
			call:   casCall(5),
			check: func(t *testing.T, err error) {
				ce, isCE := errors.AsType[*driver.ConflictError](err)
				if !isCE || ce.Version == driver.NoVersion || ce.Version == 5 || len(ce.Value) == 0 || ce.Value[0] != 0 {
					t.Fatalf("err = %#v, want a *driver.ConflictError with the foreign item's version and an undecodable value", err)
				}
			},
			wantOps: []string{"UpdateItem"},
		},
		{
			// With the version Get gave the foreign item, the write fails
			// its version condition, finds that very item in the old item
			// DynamoDB returns, and writes again on a condition naming its
			// raw attributes: no read in between.
			name: "put-over-foreign-old-item-named-by-its-version-replaces-it",
			script: map[string][]awsReply{
				"GetItem":    {ok(`{"Item":{"pk":{"S":"h.example"},"ver":{"S":"x"},"rec":{"L":[{"N":"1"}]}}}`)},
				"UpdateItem": {conditionalFailed(`{"pk":{"S":"h.example"},"ver":{"S":"x"},"rec":{"L":[{"N":"1"}]}}`), ok(`{}`)},
			},
			call: func(ctx context.Context, s driver.Store) error {
				_, ver, err := s.Get(ctx, "h.example")
				if err != nil {
					return err
				}
				_, err = s.CompareAndSwap(ctx, "h.example", ver, []byte("v"), time.Minute)
				return err
			},
			check: func(t *testing.T, err error) {
				if err != nil {
					t.Fatal(err)
				}
			},
			wantOps: []string{"GetItem", "UpdateItem", "UpdateItem"},
		},
		{
			name:   "delete-conflict-returns-old-item",
			script: map[string][]awsReply{"UpdateItem": {conditionalFailed(live)}},
			call:   func(ctx context.Context, s driver.Store) error { return s.CompareAndDelete(ctx, "h.example", 5) },
			check: func(t *testing.T, err error) {
				mustConflict(t, err, []byte("current"), 77)
			},
			wantOps: []string{"UpdateItem"},
		},
		{
			name:   "delete-conflict-old-item-expired-is-not-found",
			script: map[string][]awsReply{"UpdateItem": {conditionalFailed(expired)}},
			call:   func(ctx context.Context, s driver.Store) error { return s.CompareAndDelete(ctx, "h.example", 66) },
			check: func(t *testing.T, err error) {
				if !errors.Is(err, driver.ErrNotFound) {
					t.Fatalf("err = %v, want ErrNotFound", err)
				}
			},
			wantOps: []string{"UpdateItem"},
		},
		{
			name:   "throttled-then-accepted-is-retried-by-the-sdk",
			script: map[string][]awsReply{"UpdateItem": {awsError(nsDynamo+"ProvisionedThroughputExceededException", msgThroughput, ""), awsError(nsDynamo+"ProvisionedThroughputExceededException", msgThroughput, ""), ok(`{}`)}},
			call:   casCall(driver.NoVersion),
			check: func(t *testing.T, err error) {
				if err != nil {
					t.Fatal(err)
				}
			},
			wantOps: []string{"UpdateItem", "UpdateItem", "UpdateItem"},
		},
		{
			name:   "throttled-until-retries-run-out-keeps-the-sdk-type",
			script: map[string][]awsReply{"GetItem": {awsError(nsDynamo+"ProvisionedThroughputExceededException", msgThroughput, "")}},
			call: func(ctx context.Context, s driver.Store) error {
				_, _, err := s.Get(ctx, "h.example")
				return err
			},
			check: func(t *testing.T, err error) {
				if _, ok := errors.AsType[*types.ProvisionedThroughputExceededException](err); !ok {
					t.Fatalf("err = %v: *types.ProvisionedThroughputExceededException lost", err)
				}
				if !strings.HasPrefix(err.Error(), `dynamodb: get h.example: operation error DynamoDB: GetItem`) || errors.Is(err, driver.ErrNotFound) {
					t.Fatalf("err = %q", err)
				}
				if oe, ok := err.(*driver.OpError); !ok || oe.Backend != "dynamodb" || oe.Op != "get" || oe.Key != "h.example" {
					t.Fatalf("err = %#v, want a *driver.OpError{dynamodb, get, h.example}", err)
				}
			},
			wantOps: []string{"GetItem", "GetItem", "GetItem"},
		},
		{
			name:   "get-reads-consistently-and-filters-expired",
			script: map[string][]awsReply{"GetItem": {ok(`{"Item":` + expired + `}`)}},
			call: func(ctx context.Context, s driver.Store) error {
				_, _, err := s.Get(ctx, "h.example")
				return err
			},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, driver.ErrNotFound) {
					t.Fatalf("err = %v, want ErrNotFound", err)
				}
			},
			wantOps: []string{"GetItem"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFakeAWS(t, tc.script)
			s, err := dynamodb.New(c, table, dynamodb.WithClock(clk.Now))
			if err != nil {
				t.Fatal(err)
			}
			err = tc.call(t.Context(), s)
			tc.check(t, err)
			noCredentials(t, err)
			if got := f.ops(); fmt.Sprint(got) != fmt.Sprint(tc.wantOps) {
				t.Fatalf("requests %v, want %v", got, tc.wantOps)
			}
			for i, op := range f.ops() {
				req := f.request(i)
				switch op {
				case "UpdateItem":
					if req.body["ReturnValuesOnConditionCheckFailure"] != "ALL_OLD" || req.body["ConditionExpression"] == nil {
						t.Errorf("%s request without ALL_OLD or a condition: %v", op, req.body)
					}
				case "GetItem":
					if req.body["ConsistentRead"] != true {
						t.Errorf("GetItem without ConsistentRead: %v", req.body)
					}
				}
			}
		})
	}
}

// noCredentials fails if err's text carries the client's credentials (the
// fixture's fake ones: dynalite.NewClient).
func noCredentials(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, secret := range []string{"AKIDFAKEFORTESTS", "fake-secret-for-tests", "Authorization", "Signature="} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error text contains %q: %v", secret, err)
		}
	}
}

func casCall(old driver.Version) func(context.Context, driver.Store) error {
	return func(ctx context.Context, s driver.Store) error {
		_, err := s.CompareAndSwap(ctx, "h.example", old, []byte("new"), time.Minute)
		return err
	}
}

// TestAWSShapesRetryFindsOwnWrite is the ambiguous outcome as DynamoDB
// answers it: the first UpdateItem is applied but answered with a 500, the
// SDK retries, and the retry's failed condition returns the old item
// (ALL_OLD), which is the first attempt's write or holds it in its history.
// The adapter must take that as its success without a GetItem; taking the
// retry's answer at face value would return a conflict (or ErrNotFound for
// the delete) for its own write.
func TestAWSShapesRetryFindsOwnWrite(t *testing.T) {
	clk := newFakeClock(time.Date(2026, 11, 30, 9, 0, 0, 500_000_000, time.UTC))
	now := clk.Now().Unix()
	internal := awsReply{http.StatusInternalServerError, `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"Internal server error"}`}
	// written is the version the first request wrote (its :new).
	written := func(got []awsRequest) string {
		vals, _ := got[0].body["ExpressionAttributeValues"].(map[string]any)
		n, _ := vals[":new"].(map[string]any)
		s, _ := n["N"].(string)
		return s
	}
	for _, tc := range []struct {
		name string
		old  func(mine string) string // the item the retry's ALL_OLD returns
		call func(context.Context, driver.Store) error
	}{
		{"put-current-version-is-mine",
			func(mine string) string {
				return fmt.Sprintf(`{"pk":{"S":"h.example"},"rec":{"B":"bmV3"},"ver":{"N":%q},"expiresAt":{"N":"%d"},"purgeAt":{"N":"%d"}}`, mine, now+60, now+3660)
			},
			casCall(5)},
		{"put-replaced-by-another-worker",
			func(mine string) string {
				return fmt.Sprintf(`{"pk":{"S":"h.example"},"rec":{"B":"b3RoZXI="},"ver":{"N":"99"},"h1":{"N":%q},"h2":{"N":"5"},"expiresAt":{"N":"%d"},"purgeAt":{"N":"%d"}}`, mine, now+60, now+3660)
			},
			casCall(5)},
		{"delete-tombstone-is-mine",
			func(mine string) string {
				return fmt.Sprintf(`{"pk":{"S":"h.example"},"ver":{"N":%q},"h1":{"N":"5"},"expiresAt":{"N":"0"},"purgeAt":{"N":"%d"}}`, mine, now+3600)
			},
			func(ctx context.Context, s driver.Store) error { return s.CompareAndDelete(ctx, "h.example", 5) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFakeAWS(t, nil)
			f.reply = func(got []awsRequest) (awsReply, bool) {
				if len(got) == 1 {
					return internal, true
				}
				return conditionalFailed(tc.old(written(got))), true
			}
			s, err := dynamodb.New(c, table, dynamodb.WithClock(clk.Now))
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.call(t.Context(), s); err != nil {
				t.Fatalf("retry met its own write: %v; want success", err)
			}
			if got := f.ops(); fmt.Sprint(got) != "[UpdateItem UpdateItem]" {
				t.Fatalf("requests %v, want the write and its retry only", got)
			}
			if a, b := f.request(0).body, f.request(1).body; fmt.Sprint(a) != fmt.Sprint(b) {
				t.Fatalf("the retry is not the same request:\n%v\n%v", a, b)
			}
		})
	}
}

func TestAWSShapesThrottlingBoundedByContext(t *testing.T) {
	// A retryer that would wait 10 s between attempts: the context, not
	// the retryer, ends the call.
	_, c := newFakeAWS(t, map[string][]awsReply{
		"UpdateItem": {awsError("com.amazon.coral.availability#ThrottlingException", msgThrottling, "")},
	}, func(o *dyn.Options) {
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = 10
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 10 * time.Second, nil })
		})
	})
	s, err := dynamodb.New(c, table)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = s.CompareAndSwap(ctx, "h.example", driver.NoVersion, []byte("x"), time.Minute)
	d := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, driver.ErrConflict) {
		t.Fatalf("err = %v, want the context's deadline", err)
	}
	// Half the retryer's 10 s back-off: ending with the context, not after
	// a retry; a tighter bound measured the machine's load.
	if d > 5*time.Second {
		t.Fatalf("took %v; the context allowed 300ms", d)
	}
	noCredentials(t, err)
	t.Logf("throttled call ended after %v: %v", d.Round(time.Millisecond), err)
}

func TestAWSShapesCreateTable(t *testing.T) {
	const (
		creating     = `{"TableDescription":{"TableName":"kvbreaker","TableStatus":"CREATING","KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}],"BillingModeSummary":{"BillingMode":"PAY_PER_REQUEST"}}}`
		descCreating = `{"Table":{"TableName":"kvbreaker","TableStatus":"CREATING","KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}]}}`
		descActive   = `{"Table":{"TableName":"kvbreaker","TableStatus":"ACTIVE","KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}]}}`
		descOtherKey = `{"Table":{"TableName":"kvbreaker","TableStatus":"ACTIVE","KeySchema":[{"AttributeName":"id","KeyType":"HASH"}],"AttributeDefinitions":[{"AttributeName":"id","AttributeType":"S"}]}}`
		ttlDisabled  = `{"TimeToLiveDescription":{"TimeToLiveStatus":"DISABLED"}}`
		ttlOurs      = `{"TimeToLiveDescription":{"AttributeName":"purgeAt","TimeToLiveStatus":"ENABLED"}}`
		ttlOther     = `{"TimeToLiveDescription":{"AttributeName":"ttl","TimeToLiveStatus":"ENABLED"}}`
		ttlUpdated   = `{"TimeToLiveSpecification":{"AttributeName":"purgeAt","Enabled":true}}`
	)
	inUse := awsError(nsDynamo+"ResourceInUseException", "Table already exists: kvbreaker", "")
	for _, tc := range []struct {
		name    string
		script  map[string][]awsReply
		wantErr string
		wantOps []string
	}{
		{"new-table-waits-and-enables-ttl",
			map[string][]awsReply{"CreateTable": {ok(creating)}, "DescribeTable": {ok(descCreating), ok(descActive)},
				"DescribeTimeToLive": {ok(ttlDisabled)}, "UpdateTimeToLive": {ok(ttlUpdated)}},
			"", []string{"CreateTable", "DescribeTable", "DescribeTable", "DescribeTimeToLive", "UpdateTimeToLive"}},
		{"existing-table-with-ttl-is-left-alone",
			map[string][]awsReply{"CreateTable": {inUse}, "DescribeTable": {ok(descActive)}, "DescribeTimeToLive": {ok(ttlOurs)}},
			"", []string{"CreateTable", "DescribeTable", "DescribeTimeToLive"}},
		{"ttl-on-another-attribute-is-an-error",
			map[string][]awsReply{"CreateTable": {inUse}, "DescribeTable": {ok(descActive)}, "DescribeTimeToLive": {ok(ttlOther)}},
			`TTL is enabled on attribute "ttl"`, []string{"CreateTable", "DescribeTable", "DescribeTimeToLive"}},
		{"other-key-schema-is-an-error",
			map[string][]awsReply{"CreateTable": {inUse}, "DescribeTable": {ok(descOtherKey)}},
			"another key schema", []string{"CreateTable", "DescribeTable"}},
		{"server-without-ttl-api-is-tolerated",
			map[string][]awsReply{"CreateTable": {ok(creating)}, "DescribeTable": {ok(descActive)}},
			"", []string{"CreateTable", "DescribeTable", "DescribeTimeToLive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFakeAWS(t, tc.script)
			err := dynamodb.CreateTable(t.Context(), c, table)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
			if got := f.ops(); fmt.Sprint(got) != fmt.Sprint(tc.wantOps) {
				t.Fatalf("requests %v, want %v", got, tc.wantOps)
			}
			for i, op := range f.ops() {
				req := f.request(i)
				switch op {
				case "CreateTable":
					if req.body["BillingMode"] != "PAY_PER_REQUEST" {
						t.Errorf("CreateTable without on-demand billing: %v", req.body)
					}
				case "UpdateTimeToLive":
					spec, _ := req.body["TimeToLiveSpecification"].(map[string]any)
					if spec["AttributeName"] != dynamodb.AttrPurgeAt || spec["Enabled"] != true {
						t.Errorf("UpdateTimeToLive %v, want %s enabled", req.body, dynamodb.AttrPurgeAt)
					}
				}
			}
		})
	}
}

func TestCreateTableIsIdempotentOnDynalite(t *testing.T) {
	for range 2 {
		if err := dynamodb.CreateTable(t.Context(), client, "idempotent"); err != nil {
			t.Fatal(err)
		}
	}
}
