package dynamodb_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/driver"
)

const hour = time.Hour

// mustConflict checks err is a conflict carrying want's value and version,
// with the SDK's error type kept.
func mustConflict(t *testing.T, err error, wantVal []byte, wantVer driver.Version) {
	t.Helper()
	mustConflictNoWrite(t, err, wantVal, wantVer)
	if _, ok := errors.AsType[*types.ConditionalCheckFailedException](err); !ok {
		t.Fatalf("err = %v: the SDK's *types.ConditionalCheckFailedException is lost", err)
	}
}

// mustConflictNoWrite is mustConflict for a conflict found without a write
// (so there is no SDK error to keep).
func mustConflictNoWrite(t *testing.T, err error, wantVal []byte, wantVer driver.Version) {
	t.Helper()
	if !errors.Is(err, driver.ErrConflict) {
		t.Fatalf("err = %v, want a conflict", err)
	}
	// Conflicts come bare, as every backend returns them.
	ce, ok := err.(*driver.ConflictError)
	if !ok {
		t.Fatalf("err = %v (%T): want a bare *driver.ConflictError", err, err)
	}
	if ce.Version != wantVer || !bytes.Equal(ce.Value, wantVal) {
		t.Fatalf("conflict carries (%q, %d), want (%q, %d)", ce.Value, ce.Version, wantVal, wantVer)
	}
}

func mustGet(t *testing.T, s driver.Store, key string) ([]byte, driver.Version) {
	t.Helper()
	v, ver, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return v, ver
}

func mustAbsent(t *testing.T, s driver.Store, key string) {
	t.Helper()
	v, ver, err := s.Get(t.Context(), key)
	if !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("Get(%q) = %q, %d, %v; want ErrNotFound", key, v, ver, err)
	}
}

func mustCAS(t *testing.T, s driver.Store, key string, old driver.Version, val string, ttl time.Duration) driver.Version {
	t.Helper()
	ver, err := s.CompareAndSwap(t.Context(), key, old, []byte(val), ttl)
	if err != nil {
		t.Fatalf("CompareAndSwap(%q, %d, %q): %v", key, old, val, err)
	}
	if ver == driver.NoVersion || ver == old {
		t.Fatalf("CompareAndSwap returned version %d (old %d)", ver, old)
	}
	return ver
}

func TestContract(t *testing.T) {
	ctx := t.Context()
	t.Run("get-absent-is-not-found", func(t *testing.T) {
		mustAbsent(t, newStore(t), "nobody.example")
	})
	t.Run("create-then-get", func(t *testing.T) {
		s := newStore(t)
		ver := mustCAS(t, s, "a.example", driver.NoVersion, "one", hour)
		v, got := mustGet(t, s, "a.example")
		if string(v) != "one" || got != ver {
			t.Fatalf("Get = %q, %d; want one, %d", v, got, ver)
		}
	})
	t.Run("create-over-live-conflicts-with-current", func(t *testing.T) {
		s := newStore(t)
		ver := mustCAS(t, s, "a.example", driver.NoVersion, "one", hour)
		_, err := s.CompareAndSwap(ctx, "a.example", driver.NoVersion, []byte("two"), hour)
		mustConflict(t, err, []byte("one"), ver)
	})
	t.Run("swap-with-current-version", func(t *testing.T) {
		s := newStore(t)
		v1 := mustCAS(t, s, "a.example", driver.NoVersion, "one", hour)
		v2 := mustCAS(t, s, "a.example", v1, "two", hour)
		if v, got := mustGet(t, s, "a.example"); string(v) != "two" || got != v2 {
			t.Fatalf("Get = %q, %d; want two, %d", v, got, v2)
		}
	})
	t.Run("swap-with-stale-version-conflicts", func(t *testing.T) {
		s := newStore(t)
		v1 := mustCAS(t, s, "a.example", driver.NoVersion, "one", hour)
		v2 := mustCAS(t, s, "a.example", v1, "two", hour)
		_, err := s.CompareAndSwap(ctx, "a.example", v1, []byte("three"), hour)
		mustConflict(t, err, []byte("two"), v2)
	})
	t.Run("swap-on-absent-conflicts-as-absent", func(t *testing.T) {
		s := newStore(t)
		_, err := s.CompareAndSwap(ctx, "a.example", 12345, []byte("x"), hour)
		mustConflict(t, err, nil, driver.NoVersion)
		mustAbsent(t, s, "a.example")
	})
	t.Run("delete-with-current-version", func(t *testing.T) {
		s := newStore(t)
		v1 := mustCAS(t, s, "a.example", driver.NoVersion, "one", hour)
		if err := s.CompareAndDelete(ctx, "a.example", v1); err != nil {
			t.Fatal(err)
		}
		mustAbsent(t, s, "a.example")
	})
	t.Run("delete-with-stale-version-conflicts", func(t *testing.T) {
		s := newStore(t)
		v1 := mustCAS(t, s, "a.example", driver.NoVersion, "one", hour)
		v2 := mustCAS(t, s, "a.example", v1, "two", hour)
		mustConflict(t, s.CompareAndDelete(ctx, "a.example", v1), []byte("two"), v2)
		mustGet(t, s, "a.example")
	})
	t.Run("delete-absent-is-not-found", func(t *testing.T) {
		s := newStore(t)
		for _, old := range []driver.Version{driver.NoVersion, 777} {
			if err := s.CompareAndDelete(ctx, "a.example", old); !errors.Is(err, driver.ErrNotFound) {
				t.Fatalf("CompareAndDelete(absent, %d) = %v, want ErrNotFound", old, err)
			}
		}
	})
	t.Run("delete-expecting-absent-on-present-conflicts", func(t *testing.T) {
		s := newStore(t)
		v1 := mustCAS(t, s, "a.example", driver.NoVersion, "one", hour)
		mustConflictNoWrite(t, s.CompareAndDelete(ctx, "a.example", driver.NoVersion), []byte("one"), v1)
		mustGet(t, s, "a.example")
	})
	t.Run("no-aba-after-delete-and-recreate", func(t *testing.T) {
		s := newStore(t)
		v1 := mustCAS(t, s, "a.example", driver.NoVersion, "one", hour)
		if err := s.CompareAndDelete(ctx, "a.example", v1); err != nil {
			t.Fatal(err)
		}
		v2 := mustCAS(t, s, "a.example", driver.NoVersion, "again", hour)
		if v2 == v1 {
			t.Fatalf("re-created key got the deleted version %d back", v1)
		}
		_, err := s.CompareAndSwap(ctx, "a.example", v1, []byte("stale"), hour)
		mustConflict(t, err, []byte("again"), v2)
	})
	t.Run("non-positive-ttl-is-an-error-not-a-conflict", func(t *testing.T) {
		s := newStore(t)
		for _, ttl := range []time.Duration{0, -time.Second} {
			_, err := s.CompareAndSwap(ctx, "a.example", driver.NoVersion, []byte("x"), ttl)
			if err == nil || errors.Is(err, driver.ErrConflict) {
				t.Fatalf("ttl %v: err = %v", ttl, err)
			}
		}
		mustAbsent(t, s, "a.example")
	})
	t.Run("values-round-trip-byte-exact", func(t *testing.T) {
		s := newStore(t)
		all := make([]byte, 256)
		for i := range all {
			all[i] = byte(i)
		}
		for i, v := range [][]byte{{}, {0}, all, bytes.Repeat([]byte{0xff, 0}, 300)} {
			key := "v" + strconv.Itoa(i)
			ver, err := s.CompareAndSwap(ctx, key, driver.NoVersion, v, hour)
			if err != nil {
				t.Fatal(err)
			}
			got, gotVer := mustGet(t, s, key)
			if !bytes.Equal(got, v) || gotVer != ver {
				t.Fatalf("value %d: got %x (v%d), want %x (v%d)", i, got, gotVer, v, ver)
			}
		}
	})
	t.Run("keys-are-distinct-and-prefixes-isolate", func(t *testing.T) {
		a, b := newStore(t), newStore(t)
		keys := []string{"a.example", "A.example", "a.example:443", "例え.jp", "x y/z?q=1", strings.Repeat("k", driver.MaxKeyLen)}
		vers := map[string]driver.Version{}
		for _, k := range keys {
			vers[k] = mustCAS(t, a, k, driver.NoVersion, "val:"+k, hour)
		}
		for _, k := range keys {
			if v, ver := mustGet(t, a, k); string(v) != "val:"+k || ver != vers[k] {
				t.Fatalf("Get(%q) = %q, %d", k, v, ver)
			}
			mustAbsent(t, b, k)
		}
	})
	t.Run("cancelled-context-is-not-a-conflict", func(t *testing.T) {
		s := newStore(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := s.CompareAndSwap(cctx, "a.example", driver.NoVersion, []byte("x"), hour)
		if !errors.Is(err, context.Canceled) || errors.Is(err, driver.ErrConflict) {
			t.Fatalf("err = %v, want context.Canceled only", err)
		}
		if _, _, err := s.Get(cctx, "a.example"); !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "dynamodb: get TestContract_cancelled-context-is-not-a-conflict/") {
			t.Fatalf("Get err = %v", err)
		}
	})
}

// putRaw writes an item directly through the SDK, as another writer (or a
// stale one) would have left it.
func putRaw(t *testing.T, key string, ver driver.Version, value []byte, expiresAt int64) {
	t.Helper()
	item := map[string]types.AttributeValue{
		dynamodb.AttrKey:       &types.AttributeValueMemberS{Value: key},
		dynamodb.AttrVersion:   &types.AttributeValueMemberN{Value: strconv.FormatUint(uint64(ver), 10)},
		dynamodb.AttrExpiresAt: &types.AttributeValueMemberN{Value: strconv.FormatInt(expiresAt, 10)},
		dynamodb.AttrRecord:    &types.AttributeValueMemberB{Value: value},
	}
	if _, err := client.PutItem(t.Context(), &dyn.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatal(err)
	}
}

// rawItem reads the item physically stored under key, or nil.
func rawItem(t *testing.T, key string) map[string]types.AttributeValue {
	t.Helper()
	return rawItemIn(t, table, key)
}

// rawItemIn reads key's item in tbl as it is stored, expired or not.
func rawItemIn(t *testing.T, tbl, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := client.GetItem(t.Context(), &dyn.GetItemInput{
		TableName: aws.String(tbl), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{dynamodb.AttrKey: &types.AttributeValueMemberS{Value: key}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func TestExpiredButPresentCountsAsAbsent(t *testing.T) {
	ctx := t.Context()
	prefix := uniquePrefix(t)
	s := newPrefixed(t, client, prefix)
	past := time.Now().Add(-time.Hour).Unix()
	putRaw(t, prefix+"old.example", 4242, []byte("stale"), past)
	if rawItem(t, prefix+"old.example") == nil {
		t.Fatal("the expired item is not physically there; the test proves nothing")
	}

	t.Run("get", func(t *testing.T) { mustAbsent(t, s, "old.example") })
	t.Run("swap-with-its-version-conflicts-as-absent", func(t *testing.T) {
		_, err := s.CompareAndSwap(ctx, "old.example", 4242, []byte("x"), hour)
		mustConflict(t, err, nil, driver.NoVersion)
	})
	t.Run("delete-with-its-version-is-not-found", func(t *testing.T) {
		if err := s.CompareAndDelete(ctx, "old.example", 4242); !errors.Is(err, driver.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
		if rawItem(t, prefix+"old.example") == nil {
			t.Fatal("a failed conditional delete removed the item")
		}
	})
	t.Run("create-succeeds", func(t *testing.T) {
		ver := mustCAS(t, s, "old.example", driver.NoVersion, "fresh", hour)
		if v, got := mustGet(t, s, "old.example"); string(v) != "fresh" || got != ver {
			t.Fatalf("Get = %q, %d", v, got)
		}
	})
}

func TestExpiryByReaderClock(t *testing.T) {
	// The store's clock is the reader's; dynalite (like DynamoDB, for days)
	// never deletes anything, so moving that clock is the whole story.
	ctx := t.Context()
	base := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		offset time.Duration // write instant within the second
		ttl    time.Duration
		expiry time.Time // first instant the entry reads as absent
	}{
		{"whole-second-write-whole-ttl", 0, 2 * time.Second, base.Add(2 * time.Second)},
		{"fractional-write-rounds-up", 200 * time.Millisecond, 2 * time.Second, base.Add(3 * time.Second)},
		{"fractional-ttl-rounds-up", 0, 1500 * time.Millisecond, base.Add(2 * time.Second)},
		{"last-nanosecond", 999_999_999, time.Second, base.Add(2 * time.Second)},
		{"sub-second-ttl", 100 * time.Millisecond, time.Millisecond, base.Add(time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock(base.Add(tc.offset))
			s := newStore(t, dynamodb.WithClock(clk.Now))
			write := clk.Now()
			ver := mustCAS(t, s, "h.example", driver.NoVersion, "rec", tc.ttl)
			lifetime := tc.expiry.Sub(write)
			if lifetime < tc.ttl || lifetime >= tc.ttl+time.Second {
				t.Fatalf("bad case: lifetime %v for ttl %v breaks the declared model", lifetime, tc.ttl)
			}
			clk.Set(tc.expiry.Add(-time.Nanosecond))
			if _, got := mustGet(t, s, "h.example"); got != ver {
				t.Fatalf("version %d, want %d", got, ver)
			}
			// Still live for the conditions too: a create conflicts.
			_, err := s.CompareAndSwap(ctx, "h.example", driver.NoVersion, []byte("y"), hour)
			mustConflict(t, err, []byte("rec"), ver)
			clk.Set(tc.expiry)
			mustAbsent(t, s, "h.example")
			_, err = s.CompareAndSwap(ctx, "h.example", ver, []byte("z"), hour)
			mustConflict(t, err, nil, driver.NoVersion)
			mustCAS(t, s, "h.example", driver.NoVersion, "new", hour)
		})
	}
}

func TestPhysicalTTLComesAfterLogicalExpiry(t *testing.T) {
	clk := newFakeClock(time.Date(2026, 11, 30, 9, 0, 0, 300_000_000, time.UTC))
	prefix := uniquePrefix(t)
	for _, tc := range []struct {
		name  string
		opts  []dynamodb.Option
		delay int64
	}{
		{"default-one-hour", nil, 3600},
		{"custom-rounded-up", []dynamodb.Option{dynamodb.WithPurgeDelay(1500 * time.Millisecond)}, 2},
		{"sub-second-rounds-up-to-one", []dynamodb.Option{dynamodb.WithPurgeDelay(time.Nanosecond)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newPrefixed(t, client, prefix, append([]dynamodb.Option{dynamodb.WithClock(clk.Now)}, tc.opts...)...)
			if _, err := s.CompareAndSwap(t.Context(), tc.name, driver.NoVersion, []byte("r"), 10*time.Second); err != nil {
				t.Fatal(err)
			}
			it := rawItem(t, prefix+tc.name)
			exp, _ := strconv.ParseInt(it[dynamodb.AttrExpiresAt].(*types.AttributeValueMemberN).Value, 10, 64)
			purge, _ := strconv.ParseInt(it[dynamodb.AttrPurgeAt].(*types.AttributeValueMemberN).Value, 10, 64)
			if want := clk.Now().Unix() + 11; exp != want {
				t.Fatalf("expiresAt = %d, want ceil(now+10s) = %d", exp, want)
			}
			if purge-exp != tc.delay {
				t.Fatalf("purgeAt - expiresAt = %d s, want %d", purge-exp, tc.delay)
			}
		})
	}
}

// TestNewValidates: every invalid argument and option is a
// *driver.OptionError from New, "dynamodb: invalid <option>: <value>: <what
// to change>", all of them joined.
func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client *dyn.Client
		table  string
		opts   []dynamodb.Option
		want   []string
	}{
		{"nil-client-and-empty-table", nil, "", nil, []string{
			"dynamodb: invalid client: nil: pass a *dynamodb.Client",
			`dynamodb: invalid table name: "": name a table of 3 to 255`}},
		{"bad-table-name", client, "no/slash", nil, []string{`dynamodb: invalid table name: "no/slash"`}},
		{"nil-clock", client, table, []dynamodb.Option{dynamodb.WithClock(nil)}, []string{"dynamodb: invalid WithClock: nil: pass the Breakers' Settings.Clock"}},
		{"negative-purge", client, table, []dynamodb.Option{dynamodb.WithPurgeDelay(-time.Second)}, []string{"dynamodb: invalid WithPurgeDelay: -1s: set at least the fleet's clock skew"}},
		// A zero purge delay would let the physical TTL delete a record
		// a reader behind by any skew still counts as live.
		{"zero-purge", client, table, []dynamodb.Option{dynamodb.WithPurgeDelay(0)}, []string{"dynamodb: invalid WithPurgeDelay: 0s"}},
		{"all-at-once", nil, "x", []dynamodb.Option{dynamodb.WithClock(nil), dynamodb.WithPurgeDelay(-1)}, []string{
			"invalid client", "invalid table name", "invalid WithClock", "invalid WithPurgeDelay: -1ns"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := dynamodb.New(tc.client, tc.table, tc.opts...)
			if err == nil || s != nil {
				t.Fatalf("New = %v, %v; want an error", s, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if _, ok := errors.AsType[*driver.OptionError](err); !ok {
				t.Errorf("error %q is not a *driver.OptionError", err)
			}
			if strings.Count(err.Error(), "dynamodb: ") != len(strings.Split(err.Error(), "\n")) {
				t.Errorf("error %q: want one \"dynamodb: \" per problem, one problem per line", err)
			}
		})
	}
	// Negative control: the valid edge values are accepted.
	if _, err := dynamodb.New(client, "abc", dynamodb.WithPurgeDelay(time.Nanosecond)); err != nil {
		t.Errorf("New with the smallest valid table name and purge delay = %v", err)
	}
}

func TestTraits(t *testing.T) {
	tr := newStore(t).Traits()
	want := driver.Traits{Atomic: true, Expiry: driver.ExpiryModel{
		Kind: driver.ExpiryReaderFiltered, Granularity: time.Second, Late: time.Second},
		MaxClockSkew: time.Hour, MaxClockSkewOption: "dynamodb.WithPurgeDelay"}
	if tr != want {
		t.Fatalf("Traits = %+v, want %+v", tr, want)
	}
	// The purge delay, rounded up to whole seconds, is exactly the skew
	// covered (see Traits' doc).
	if got := newStore(t, dynamodb.WithPurgeDelay(1500*time.Millisecond)).Traits().MaxClockSkew; got != 2*time.Second {
		t.Fatalf("MaxClockSkew with a 1.5s purge delay = %v, want 2s", got)
	}
	// Reader-filtered: the fleet's skew cancels, so the margin is E + G.
	if got := tr.Expiry.RequiredMargin(10 * time.Second); got != time.Second {
		t.Fatalf("RequiredMargin = %v, want 1s", got)
	}
}

// TestConcurrentCASNoLostUpdate races goroutines incrementing one counter
// through Get + CompareAndSwap (using the conflict's value to skip the
// re-read, as Breaker does). An atomic store ends at exactly the number of
// successful swaps.
func TestConcurrentCASNoLostUpdate(t *testing.T) {
	const goroutines, increments = 8, 25
	ctx := t.Context()
	s := newStore(t)
	if _, err := s.CompareAndSwap(ctx, "counter", driver.NoVersion, binary.BigEndian.AppendUint64(nil, 0), hour); err != nil {
		t.Fatal(err)
	}
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		conflicts int
		errs      []error
	)
	for range goroutines {
		wg.Go(func() {
			val, ver, err := s.Get(ctx, "counter")
			for done := 0; done < increments && err == nil; {
				next := binary.BigEndian.AppendUint64(nil, binary.BigEndian.Uint64(val)+1)
				var nv driver.Version
				nv, err = s.CompareAndSwap(ctx, "counter", ver, next, hour)
				if errors.Is(err, driver.ErrConflict) {
					mu.Lock()
					conflicts++
					mu.Unlock()
					ce, ok := errors.AsType[*driver.ConflictError](err)
					switch {
					case !ok: // no current value given: read it
						val, ver, err = s.Get(ctx, "counter")
					case ce.Version == driver.NoVersion:
						err = errors.New("counter vanished")
					default:
						val, ver, err = ce.Value, ce.Version, nil
					}
					continue
				}
				val, ver = next, nv
				done++
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	val, _ := mustGet(t, s, "counter")
	if got := binary.BigEndian.Uint64(val); got != goroutines*increments {
		t.Fatalf("counter = %d after %d successful swaps: lost updates", got, goroutines*increments)
	}
	if conflicts == 0 {
		t.Log("no conflicts happened: the race was not exercised this run")
	}
	t.Logf("%d increments, %d conflicts", goroutines*increments, conflicts)
}

// TestEveryWriteReplacesValueAndExpiry: a swap is an UpdateItem, so it must
// set every attribute a write owes and remove rec for an empty value; a
// delete leaves a tombstone with no value. Nothing of the previous write's
// value, expiry or purge instant may survive.
func TestEveryWriteReplacesValueAndExpiry(t *testing.T) {
	ctx := t.Context()
	clk := newFakeClock(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	prefix := uniquePrefix(t)
	s := newPrefixed(t, client, prefix, dynamodb.WithClock(clk.Now), dynamodb.WithPurgeDelay(10*time.Second))
	num := func(it map[string]types.AttributeValue, name string) int64 {
		t.Helper()
		n, ok := it[name].(*types.AttributeValueMemberN)
		if !ok {
			t.Fatalf("item has no number %s: %v", name, it)
		}
		v, _ := strconv.ParseInt(n.Value, 10, 64)
		return v
	}
	now := clk.Now().Unix()
	v1 := mustCAS(t, s, "h.example", driver.NoVersion, "long", hour)
	// Shorter TTL and an empty value: both must replace what was there.
	v2 := mustCAS(t, s, "h.example", v1, "", 5*time.Second)
	it := rawItem(t, prefix+"h.example")
	if got := num(it, dynamodb.AttrExpiresAt); got != now+5 {
		t.Fatalf("expiresAt = %d after a 5s write, want %d (the 1h write's expiry survived?)", got, now+5)
	}
	if got := num(it, dynamodb.AttrPurgeAt); got != now+15 {
		t.Fatalf("purgeAt = %d, want %d", got, now+15)
	}
	if _, ok := it[dynamodb.AttrRecord]; ok {
		t.Fatalf("an empty value kept the previous rec: %v", it)
	}
	if v, ver := mustGet(t, s, "h.example"); len(v) != 0 || ver != v2 {
		t.Fatalf("Get = %q, %d; want empty, %d", v, ver, v2)
	}
	if h1 := it[dynamodb.AttrHistory+"1"].(*types.AttributeValueMemberN).Value; h1 != strconv.FormatUint(uint64(v1), 10) {
		t.Fatalf("h1 = %s, want the replaced version %d", h1, v1)
	}
	clk.Advance(2 * time.Second)
	if err := s.CompareAndDelete(ctx, "h.example", v2); err != nil {
		t.Fatal(err)
	}
	it = rawItem(t, prefix+"h.example")
	if got := num(it, dynamodb.AttrExpiresAt); got != 0 {
		t.Fatalf("tombstone expiresAt = %d, want 0", got)
	}
	if got := num(it, dynamodb.AttrPurgeAt); got != now+2+10 {
		t.Fatalf("tombstone purgeAt = %d, want now+purge delay = %d", got, now+12)
	}
	if _, ok := it[dynamodb.AttrRecord]; ok {
		t.Fatalf("the tombstone kept a value: %v", it)
	}
	mustAbsent(t, s, "h.example")
	// A create over the tombstone writes a full item again.
	mustCAS(t, s, "h.example", driver.NoVersion, "again", time.Minute)
	it = rawItem(t, prefix+"h.example")
	if got := num(it, dynamodb.AttrExpiresAt); got != now+2+60 {
		t.Fatalf("expiresAt = %d after re-creating, want %d", got, now+62)
	}
}
