package main

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// expiryStore is backends/memory with driver.ExpiryReader (test-only: it
// remembers each write's TTL), a way to plant a value as other software
// would (no expiry), and reads that fail for chosen keys.
type expiryStore struct {
	*memory.Store
	mu     sync.Mutex
	until  map[string]time.Time // a key's expiry; absent: stored without one
	broken map[string]int       // Get of a key fails this many more times (-1: always)
}

func newExpiryStore() *expiryStore {
	return &expiryStore{Store: memory.New(), until: map[string]time.Time{}, broken: map[string]int{}}
}

func (s *expiryStore) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	v, err := s.Store.CompareAndSwap(ctx, key, old, value, ttl)
	if err == nil {
		s.mu.Lock()
		s.until[key] = time.Now().Add(ttl)
		s.mu.Unlock()
	}
	return v, err
}

func (s *expiryStore) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	s.mu.Lock()
	n := s.broken[key]
	if n > 0 {
		s.broken[key]--
	}
	s.mu.Unlock()
	if n != 0 {
		return nil, 0, &driver.OpError{Backend: "memory", Op: "get", Key: key, Err: errors.New("permission denied (test store)")}
	}
	return s.Store.Get(ctx, key)
}

func (s *expiryStore) Expiry(ctx context.Context, key string) (time.Duration, error) {
	if _, _, err := s.Store.Get(ctx, key); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.until[key]
	if !ok {
		return driver.NoExpiry, nil
	}
	return time.Until(u), nil
}

// plant stores value at key without an expiry, as software other than a
// Breaker might (memory itself needs a TTL: a day).
func (s *expiryStore) plant(t *testing.T, key string, value []byte) {
	t.Helper()
	if _, err := s.Store.CompareAndSwap(t.Context(), key, driver.NoVersion, value, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	delete(s.until, key)
	s.mu.Unlock()
}

// breakGet makes the next n reads of key fail (-1: every read).
func (s *expiryStore) breakGet(key string, n int) {
	s.mu.Lock()
	s.broken[key] = n
	s.mu.Unlock()
}

// expiryMem is the store of --backend memory-expiry, one per process like
// memory's; each test uses its own prefix.
var expiryMem = newExpiryStore()

func init() {
	backends["memory-expiry"] = variant(func(context.Context, *backendFlags) (*conn, error) {
		return &conn{describe: "memory with expiry (test)", store: expiryMem}, nil
	}, "memory")
}

// expiryBreaker is a Breaker over expiryMem under prefix.
func expiryBreaker(t *testing.T, prefix string) *kvbreaker.Breaker {
	t.Helper()
	p, err := kvbreaker.Prefixed(expiryMem, prefix)
	if err != nil {
		t.Fatal(err)
	}
	b, err := kvbreaker.New(p, kvbreaker.Settings{FailureThreshold: 2})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func listJSONCode(t *testing.T, want int, args ...string) (listOutput, string) {
	t.Helper()
	code, out, errOut := runT(t, append([]string{"list", "--format", "json"}, args...)...)
	if code != want {
		t.Fatalf("list %v: exit %d, want %d\n%s\n%s", args, code, want, out, errOut)
	}
	var l listOutput
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("list output is not JSON: %v\n%s", err, out)
	}
	return l, errOut
}

func hostRow(t *testing.T, l listOutput, host string) statusJSON {
	t.Helper()
	for _, h := range l.Hosts {
		if h.Host == host {
			return h
		}
	}
	t.Fatalf("list lacks %s: %v", host, hostNames(l))
	return statusJSON{}
}

// TestListUnreadableAndUndecodable: a key the store fails to read and a
// value no Breaker wrote do not stop list: each is listed with its reason
// (read error; decode error, not "closed 0") among the others, in JSON and
// table, whatever --state; list then exits 1 because one was unreadable.
// EXPIRES IN shows the TTL of a Breaker's record and "never" for the
// planted value. A list that stopped at the unreadable key would show the
// operator nothing, and an undecodable value shown as closed with 0
// failures would pass for a healthy host.
func TestListUnreadableAndUndecodable(t *testing.T) {
	prefix := "unread-" + randomHex(4) + "/"
	b := expiryBreaker(t, prefix)
	ctx := t.Context()
	for _, h := range []string{"a-open.example", "b-broken.example"} {
		for range 2 {
			if err := b.Failure(ctx, h); err != nil {
				t.Fatal(err)
			}
		}
	}
	expiryMem.plant(t, prefix+"c-junk.example", []byte("not a record"))
	expiryMem.breakGet(prefix+"b-broken.example", -1)
	t.Cleanup(func() { expiryMem.breakGet(prefix+"b-broken.example", 0) })
	args := []string{"--backend", "memory-expiry", "--prefix", prefix}

	l, errOut := listJSONCode(t, exitFail, args...)
	if got := strings.Join(hostNames(l), ","); got != "a-open.example,b-broken.example,c-junk.example" || l.Scanned != 3 ||
		l.Unreadable != 1 || l.Undecodable != 1 || l.NoExpiry != 1 {
		t.Fatalf("list: hosts %s, %+v", got, l)
	}
	if !strings.Contains(errOut, "failed to read 1 of the 3 key(s)") || !strings.Contains(errOut, "stored without an expiry") {
		t.Errorf("stderr: %s", errOut)
	}
	open := hostRow(t, l, "a-open.example")
	if open.State != "open" || !open.RecordValid || open.Unreadable || open.Expiry == nil || *open.Expiry != expiryTTL ||
		open.ExpiresInMS == nil || *open.ExpiresInMS < *open.RestrainedForMS || *open.ExpiresInMS > float64(2*time.Hour/time.Millisecond) {
		t.Errorf("open host: %+v", open)
	}
	broken := hostRow(t, l, "b-broken.example")
	if !broken.Unreadable || broken.State != "unknown" || broken.RecordValid || broken.Message == nil ||
		!strings.Contains(*broken.Message, "permission denied (test store)") {
		t.Errorf("unreadable host: %+v", broken)
	}
	junk := hostRow(t, l, "c-junk.example")
	if junk.RecordValid || junk.Unreadable || junk.Message == nil || *junk.Message == "" || junk.Expiry == nil || *junk.Expiry != expiryNever || junk.ExpiresInMS != nil {
		t.Errorf("undecodable host: %+v", junk)
	}

	// --state open keeps the unreadable key: its state is unknown.
	l, _ = listJSONCode(t, exitFail, append(args, "--state", "open")...)
	if got := strings.Join(hostNames(l), ","); got != "a-open.example,b-broken.example" {
		t.Errorf("--state open: %s", got)
	}

	code, out, errOut := runT(t, append([]string{"list"}, args...)...)
	for _, w := range []string{"EXPIRES IN", "b-broken.example", "unreadable", "read error: ", "permission denied (test store)",
		"c-junk.example", "undecodable", "decode error: " + *junk.Message, "never", "3 host(s), 3 key(s) read, 1 unreadable, 1 undecodable, 1 without expiry"} {
		if !strings.Contains(out, w) {
			t.Errorf("table lacks %q", w)
		}
	}
	if code != exitFail || !strings.Contains(errOut, "Error: the store failed to read 1 of the 3 key(s)") {
		t.Errorf("table: exit %d\n%s\n%s", code, out, errOut)
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("table:\n%s\nstderr:\n%s", out, errOut)
	}

	// Negative control: once the key reads again, list exits 0.
	expiryMem.breakGet(prefix+"b-broken.example", 0)
	if l, _ := listJSONCode(t, exitOK, args...); l.Unreadable != 0 || l.Undecodable != 1 {
		t.Errorf("after the read works: %+v", l)
	}
}

// TestInspectExpiry: inspect says how long the store keeps the key, warns
// (table and stderr) of a key stored without an expiry, and says
// "unknown" for a store that cannot tell: a key with no expiry outlives
// every restraint, and the operator needs to see it.
func TestInspectExpiry(t *testing.T) {
	prefix := "expiry-" + randomHex(4) + "/"
	b := expiryBreaker(t, prefix)
	for range 2 {
		if err := b.Failure(t.Context(), "open.example"); err != nil {
			t.Fatal(err)
		}
	}
	// A valid open record, but written without a TTL.
	v, _, err := expiryMem.Get(t.Context(), prefix+"open.example")
	if err != nil {
		t.Fatal(err)
	}
	expiryMem.plant(t, prefix+"forever.example", v)
	args := []string{"--backend", "memory-expiry", "--prefix", prefix}

	st := inspectJSON(t, append(args, "open.example")...)
	if st.Expiry == nil || *st.Expiry != expiryTTL || st.ExpiresInMS == nil || *st.ExpiresInMS <= 0 {
		t.Errorf("open.example: %+v", st.statusJSON)
	}
	code, out, errOut := runT(t, append([]string{"inspect"}, append(args, "open.example")...)...)
	if code != exitOK || !strings.Contains(out, "expires:           in ") || errOut != "" {
		t.Errorf("open.example table: exit %d\n%s\n%s", code, out, errOut)
	}

	st = inspectJSON(t, append(args, "forever.example")...)
	if st.State != "open" || st.Expiry == nil || *st.Expiry != expiryNever || st.ExpiresInMS != nil {
		t.Errorf("forever.example: %+v", st.statusJSON)
	}
	code, out, errOut = runT(t, append([]string{"inspect"}, append(args, "forever.example")...)...)
	if code != exitOK || !strings.Contains(out, "expires:           never: stored without an expiry") ||
		!strings.Contains(errOut, "warning: forever.example is stored without an expiry") {
		t.Errorf("forever.example table: exit %d\n%s\n%s", code, out, errOut)
	}

	// No record: no expiry either.
	if st := inspectJSON(t, append(args, "none.example")...); st.Expiry != nil || st.ExpiresInMS != nil {
		t.Errorf("no record: %+v", st.statusJSON)
	}
	// A store without driver.ExpiryReader, bare or under a prefix
	// (Prefixed then fails with errors.ErrUnsupported): unknown.
	plain := noLister{memory.New()}
	under, err := kvbreaker.Prefixed(plain, "p/")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []driver.Store{plain, under} {
		if kind, _, why := readExpiry(t.Context(), s, "x.example"); kind != expiryUnknown || why != "" {
			t.Errorf("%T: %s (%s), want unknown", s, kind, why)
		}
	}
}

// TestHostAsListed: what list prints is what inspect and reset take, also
// a key a Breaker was given with capitals (kvbreaker.HostKey would lower
// them) or with a space (the table quotes it for a shell); a URL or a host
// with no record under exactly its spelling is still normalised. Lowering
// HOST first would make inspect and reset of "Caps.Example" read and reset
// "caps.example" instead.
func TestHostAsListed(t *testing.T) {
	prefix := "caps-" + randomHex(4) + "/"
	b := expiryBreaker(t, prefix)
	ctx := t.Context()
	for _, h := range []string{"Caps.Example", "with space", "lower.example"} {
		for range 2 {
			if err := b.Failure(ctx, h); err != nil {
				t.Fatal(err)
			}
		}
	}
	args := []string{"--backend", "memory-expiry", "--prefix", prefix}
	l := listJSON(t, args...)
	if got := strings.Join(hostNames(l), ","); got != "Caps.Example,lower.example,with space" {
		t.Fatalf("list: %s", got)
	}
	code, out, errOut := runT(t, append([]string{"list"}, args...)...)
	if code != exitOK || !strings.Contains(out, "\n'with space' ") || !strings.Contains(out, "\nCaps.Example ") {
		t.Errorf("table: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, h := range hostNames(l) {
		if st := inspectJSON(t, append(args, h)...); !st.Found || st.Host != h || st.State != "open" {
			t.Errorf("inspect %q: %+v", h, st.statusJSON)
		}
	}
	// Normalised when nothing is stored under the exact spelling.
	for _, arg := range []string{"https://LOWER.example:443/inbox", "Lower.Example"} {
		if st := inspectJSON(t, append(args, arg)...); !st.Found || st.Host != "lower.example" {
			t.Errorf("inspect %q: %+v", arg, st.statusJSON)
		}
	}
	code, out, errOut = runT(t, append([]string{"reset", "--yes"}, append(args, "Caps.Example")...)...)
	if code != exitOK || out != "Caps.Example: open -> closed (record deleted)\n" {
		t.Errorf("reset Caps.Example: exit %d\n%s\n%s", code, out, errOut)
	}
	if st, err := b.Inspect(ctx, "Caps.Example"); err != nil || st.Found {
		t.Errorf("after reset: %+v, %v", st, err)
	}
	// With no exact record left, Caps.Example is caps.example.
	if st := inspectJSON(t, append(args, "Caps.Example")...); st.Found || st.Host != "caps.example" {
		t.Errorf("inspect after reset: %+v", st.statusJSON)
	}
	// Neither a stored key nor a host: a usage error.
	code, out, errOut = runT(t, append([]string{"inspect"}, append(args, "https://")...)...)
	if code != exitUsage || out != "" || !strings.Contains(errOut, `HOST "https://": no record under exactly this key`) {
		t.Errorf("inspect https://: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestResetUnreadable: reset deletes a record it failed to read first,
// saying so; inspect of it exits 1 with the read error. A reset that
// needed the read to succeed could never clear such a key.
func TestResetUnreadable(t *testing.T) {
	prefix := "resetun-" + randomHex(4) + "/"
	b := expiryBreaker(t, prefix)
	for range 2 {
		if err := b.Failure(t.Context(), "down.example"); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"--backend", "memory-expiry", "--prefix", prefix}
	expiryMem.breakGet(prefix+"down.example", 1)
	code, out, errOut := runT(t, append([]string{"inspect"}, append(args, "down.example")...)...)
	if code != exitFail || !strings.Contains(errOut, "permission denied (test store)") || out != "" {
		t.Errorf("inspect of an unreadable record: exit %d\n%s\n%s", code, out, errOut)
	}
	// The first read (reset's look before) fails, the second (the reset's own) works.
	expiryMem.breakGet(prefix+"down.example", 1)
	code, out, errOut = runT(t, append([]string{"reset", "--yes", "--format", "json"}, append(args, "down.example")...)...)
	var got struct {
		Before     string  `json:"state_before"`
		Unreadable bool    `json:"unreadable"`
		Message    *string `json:"message"`
		Found      bool    `json:"had_record"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != exitOK || got.Before != "unknown" || !got.Unreadable ||
		got.Message == nil || !strings.Contains(*got.Message, "permission denied") || !got.Found {
		t.Errorf("reset of an unreadable record: exit %d, %+v, %v\n%s\n%s", code, got, err, out, errOut)
	}
	if st, err := b.Inspect(t.Context(), "down.example"); err != nil || st.Found {
		t.Errorf("after reset: %+v, %v", st, err)
	}
}

// TestShellWord: list's table prints a key so that a shell passes it back
// as one word.
func TestShellWord(t *testing.T) {
	for in, want := range map[string]string{
		"example.com":       "example.com",
		"[::1]:8080":        "[::1]:8080",
		"Caps.Example":      "Caps.Example",
		"xn--bcher-kva.ex":  "xn--bcher-kva.ex",
		"bücher.example":    "bücher.example",
		"with space":        "'with space'",
		"it's":              `'it'\''s'`,
		"$(rm -rf x)":       "'$(rm -rf x)'",
		"-leading":          "-- '-leading'",
		"a*b":               "'a*b'",
		`back\slash`:        `'back\slash'`,
		"https://x.example": "https://x.example",
	} {
		if got := shellWord(in); got != want {
			t.Errorf("shellWord(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestRedisListForeign: list over a real Redis whose prefix holds records
// of a Breaker, hashes no Breaker wrote (v without n, n not a number,
// garbage v; none with a TTL) and a record this connection's Redis user
// may not read (an ACL denies HMGET on it: NOPERM): every key is listed,
// the foreign ones with their reason, the denied one as unreadable, and
// list exits 1. Versions of backends/redis differ on the foreign shapes
// (v without n and a bad n are a read error in some, an undecodable value
// in others): either is accepted for them, never "closed" without a reason.
// Expiry is "never" for the planted hashes where backends/redis is a
// driver.ExpiryReader, "unknown" where not. One unreadable key must not
// stop list from showing the others.
func TestRedisListForeign(t *testing.T) {
	srv := redistest.MustStart(t)
	ctx := t.Context()
	raw := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer raw.Close()
	st, err := redis.New(raw)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "redisfx-" + randomHex(4) + "/"
	p, err := kvbreaker.Prefixed(st, prefix)
	if err != nil {
		t.Fatal(err)
	}
	b, err := kvbreaker.New(p, kvbreaker.Settings{FailureThreshold: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"good.example", "denied.test"} {
		for range 2 {
			if err := b.Failure(ctx, h); err != nil {
				t.Fatal(err)
			}
		}
	}
	for key, fields := range map[string][]any{
		"v-no-n.example":    {redis.FieldValue, "x"},
		"bad-n.example":     {redis.FieldValue, "x", redis.FieldVersion, "x"},
		"garbage-v.example": {redis.FieldValue, "garbage", redis.FieldVersion, "1"},
	} {
		if err := raw.HSet(ctx, prefix+key, fields...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// The command's user may run everything on every key except HMGET
	// (the record read) outside prefix*.example.
	const pass = "lister-pass-must-not-show"
	if err := raw.Do(ctx, "ACL", "SETUSER", "lister", "reset", "on", ">"+pass, "~*", "&*", "+@all", "-hmget",
		"(+hmget ~"+prefix+"*.example)").Err(); err != nil {
		t.Fatal(err)
	}
	url := "redis://lister:" + pass + "@" + srv.Addr() + "/0"
	_, hasExpiry := any(st).(driver.ExpiryReader)
	planted := expiryUnknown
	if hasExpiry {
		planted = expiryNever
	}

	code, out, errOut := runT(t, "list", "--format", "json", "--backend", "redis", "--redis-url", url, "--prefix", prefix)
	var l listOutput
	if err := json.Unmarshal([]byte(out), &l); err != nil || code != exitFail {
		t.Fatalf("list: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	if strings.Contains(out+errOut, pass) {
		t.Errorf("output shows the password")
	}
	if got := strings.Join(hostNames(l), ","); got != "bad-n.example,denied.test,garbage-v.example,good.example,v-no-n.example" || l.Unreadable < 1 {
		t.Fatalf("list: %s, %+v", got, l)
	}
	if h := hostRow(t, l, "good.example"); h.State != "open" || !h.RecordValid || h.Expiry == nil ||
		(hasExpiry && *h.Expiry != expiryTTL) || (!hasExpiry && *h.Expiry != expiryUnknown) {
		t.Errorf("good.example: %+v", h)
	}
	if h := hostRow(t, l, "denied.test"); !h.Unreadable || h.State != "unknown" || h.Message == nil || !strings.Contains(*h.Message, "NOPERM") {
		t.Errorf("denied.test: %+v", h)
	}
	if h := hostRow(t, l, "garbage-v.example"); h.Unreadable || h.RecordValid || h.Message == nil || h.Expiry == nil || *h.Expiry != planted {
		t.Errorf("garbage-v.example: %+v", h)
	}
	for _, k := range []string{"v-no-n.example", "bad-n.example"} {
		if h := hostRow(t, l, k); h.RecordValid || h.Message == nil || *h.Message == "" {
			t.Errorf("%s: %+v", k, h)
		}
	}
	// The table: every key, with its reason.
	code, out, errOut = runT(t, "list", "--backend", "redis", "--redis-url", url, "--prefix", prefix)
	for _, w := range []string{"good.example", "denied.test", "read error: ", "NOPERM", "garbage-v.example", "decode error: ", "5 host(s), 5 key(s) read"} {
		if !strings.Contains(out, w) {
			t.Errorf("table lacks %q", w)
		}
	}
	if code != exitFail || !strings.Contains(errOut, "Error: the store failed to read") {
		t.Errorf("table: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestDynamoDBListForeign: list over dynalite whose prefix holds a
// Breaker's record and items no Breaker wrote (ver a string, ver 0, rec
// not binary; each live by its expiresAt): every item is listed, the
// foreign ones with a reason (a read error or, where backends/dynamodb
// reads them as undecodable values, a decode error: either is accepted),
// never as a healthy closed record; the Breaker's record reads right. One
// malformed item must not stop list from showing the others.
func TestDynamoDBListForeign(t *testing.T) {
	prefix := "dynfx-" + randomHex(4) + "/"
	b, flush := openTest(t, "dynamodb", prefix)
	ctx := t.Context()
	for range 5 {
		if err := b.Failure(ctx, "good.example"); err != nil {
			t.Fatal(err)
		}
	}
	flush()
	live := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	client := newClient(dynSrv.Endpoint)
	// The table is shared: TestList pages through it with --limit 1, and
	// a DynamoDB scan's page is counted before its prefix filter.
	t.Cleanup(func() {
		for _, k := range []string{"good.example", "ver-string.example", "ver-zero.example", "rec-string.example"} {
			_, err := client.DeleteItem(context.Background(), &dyn.DeleteItemInput{TableName: aws.String(dynTable),
				Key: map[string]types.AttributeValue{dynamodb.AttrKey: &types.AttributeValueMemberS{Value: prefix + k}}})
			if err != nil {
				t.Error(err)
			}
		}
	})
	for key, item := range map[string]map[string]types.AttributeValue{
		"ver-string.example": {dynamodb.AttrVersion: &types.AttributeValueMemberS{Value: "x"}, dynamodb.AttrRecord: &types.AttributeValueMemberB{Value: []byte("x")}},
		"ver-zero.example":   {dynamodb.AttrVersion: &types.AttributeValueMemberN{Value: "0"}, dynamodb.AttrRecord: &types.AttributeValueMemberB{Value: []byte("x")}},
		"rec-string.example": {dynamodb.AttrVersion: &types.AttributeValueMemberN{Value: "3"}, dynamodb.AttrRecord: &types.AttributeValueMemberS{Value: "x"}},
	} {
		item[dynamodb.AttrKey] = &types.AttributeValueMemberS{Value: prefix + key}
		item[dynamodb.AttrExpiresAt] = &types.AttributeValueMemberN{Value: live}
		if _, err := client.PutItem(ctx, &dyn.PutItemInput{TableName: aws.String(dynTable), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runT(t, append([]string{"list", "--format", "json", "--prefix", prefix}, connArgs("dynamodb")...)...)
	var l listOutput
	if err := json.Unmarshal([]byte(out), &l); err != nil || (code != exitOK && code != exitFail) || (code == exitFail) != (l.Unreadable > 0) {
		t.Fatalf("list: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	if got := strings.Join(hostNames(l), ","); got != "good.example,rec-string.example,ver-string.example,ver-zero.example" {
		t.Fatalf("list: %s\n%s", got, errOut)
	}
	if h := hostRow(t, l, "good.example"); h.State != "open" || !h.RecordValid || h.FailureCount != 5 {
		t.Errorf("good.example: %+v", h)
	}
	for _, k := range []string{"ver-string.example", "ver-zero.example", "rec-string.example"} {
		if h := hostRow(t, l, k); h.RecordValid || h.Message == nil || *h.Message == "" {
			t.Errorf("%s: %+v", k, h)
		}
	}
}
