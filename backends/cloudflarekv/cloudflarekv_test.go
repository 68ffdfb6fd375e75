package cloudflarekv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudflare/cloudflare-go/v6/kv"
	"github.com/cloudflare/cloudflare-go/v6/option"
	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

// TestRoundTrip checks what lands in KV: the envelope, the logical expiry in
// the metadata, and a padded physical expiry at least the 60 s minimum.
func TestRoundTrip(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	if _, _, err := s.Get(ctx, "host.example"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("Get of an absent key = %v, want ErrNotFound", err)
	}
	rec := record.EncodeRecord(record.Record{Failures: []time.Time{srv.Now().Truncate(time.Millisecond)}})
	for _, tc := range []struct {
		name    string
		ttl     time.Duration
		wantTTL int64 // expiration_ttl in seconds
	}{
		{"short-ttl-raised-to-60s", 5 * time.Second, 60},
		{"long-ttl-padded", 10 * time.Minute, 600 + 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := tc.name + ".example"
			written := srv.Now()
			ver, err := s.CompareAndSwap(ctx, key, driver.NoVersion, rec, tc.ttl)
			if err != nil || ver == driver.NoVersion {
				t.Fatalf("CompareAndSwap = %d, %v", ver, err)
			}
			// A second store reads from KV, not from s's cache.
			v, ver2, err := sibling(t, s).Get(ctx, key)
			if err != nil || ver2 != ver || string(v) != string(rec) {
				t.Fatalf("Get from another store = %x, %d, %v; want %x, %d", v, ver2, err, rec, ver)
			}
			raw, meta, found, err := srv.RawGet(ctx, s.prefix+key)
			if err != nil || !found {
				t.Fatalf("RawGet = %v, %v", found, err)
			}
			var env envelope
			var md metadata
			if err := json.Unmarshal(raw, &env); err != nil {
				t.Fatalf("stored value %q is not the envelope: %v", raw, err)
			}
			if err := json.Unmarshal(meta, &md); err != nil {
				t.Fatalf("stored metadata %q: %v", meta, err)
			}
			wantExp := written.Add(tc.ttl).UnixMilli()
			if env.Exp != wantExp || md.Exp != wantExp || md.Ver != uint64(ver) {
				t.Errorf("logical expiry: value %d, metadata %d (version %d); want %d and version %d", env.Exp, md.Exp, md.Ver, wantExp, ver)
			}
			keys, err := srv.List(ctx, s.prefix+key)
			if err != nil || len(keys) != 1 {
				t.Fatalf("List = %v, %v", keys, err)
			}
			if want := written.Unix() + tc.wantTTL; keys[0].Expiration != want {
				t.Errorf("physical expiration = %d, want %d (now %d + expiration_ttl %d)", keys[0].Expiration, want, written.Unix(), tc.wantTTL)
			}
		})
	}
}

// hostileKeys are keys that break naive escaping, plus the longest a host
// can be.
var hostileKeys = []string{
	"a/b", "a%2Fb", "a%2fb", "a b", "a+b", "a%20b", "a#b", "a?b", "a?b=c&d", "a\\b", "a;b", "a:b", "a@b",
	"..", ".", "../x", "./x", "a/../b", "/leading", "trailing/", "//", "%", "a%", "%zz", "%00",
	"Host.Example", "host.example", "bücher.example", "日本語.jp", "🦀.example", "e\u0301", "é",
	"[::1]:8080", "*", "~user", "'quote\"", "<tag>",
	strings.Repeat("k", driver.MaxKeyLen),
	strings.Repeat("🦀", driver.MaxKeyLen/4),
}

// TestHostileKeys writes every hostile key through one store and reads it
// back through another (so from KV, not a cache), and checks that KV holds
// exactly prefix+key for each: escaped for the URL, never mangled, never
// colliding.
func TestHostileKeys(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	vers := make(map[string]driver.Version)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, k := range hostileKeys {
		if err := driver.ValidateKey(k); err != nil {
			t.Fatalf("test key %q: %v", k, err)
		}
		wg.Go(func() {
			ver, err := s.CompareAndSwap(ctx, k, driver.NoVersion, fmt.Appendf(nil, "value %d", i), time.Hour)
			if err != nil {
				t.Errorf("CompareAndSwap(%q) = %v", k, err)
			}
			mu.Lock()
			vers[k] = ver
			mu.Unlock()
		})
	}
	wg.Wait()
	r := sibling(t, s)
	for i, k := range hostileKeys {
		v, ver, err := r.Get(ctx, k)
		if err != nil || ver != vers[k] || string(v) != fmt.Sprintf("value %d", i) {
			t.Errorf("Get(%q) = %q, %d, %v; want %q, %d", k, v, ver, err, fmt.Sprintf("value %d", i), vers[k])
		}
	}
	keys, err := srv.List(ctx, s.prefix)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, k := range keys {
		stored[k.Name] = true
	}
	for _, k := range hostileKeys {
		if name := kvbreaker.PrefixedKey(s.prefix, k); !stored[name] {
			t.Errorf("KV has no key named exactly %q", name)
		}
	}
	if len(keys) != len(hostileKeys) {
		t.Errorf("KV holds %d keys under the prefix, want %d (one per hostile key)", len(keys), len(hostileKeys))
	}
	// Too long with the prefix: an error, not a panic or a truncation.
	long := strings.Repeat("x", MaxKeyLen)
	if _, err := s.CompareAndSwap(ctx, long, driver.NoVersion, []byte("x"), time.Hour); err == nil || !strings.Contains(err.Error(), "512-byte") {
		t.Errorf("CompareAndSwap of a %d-byte key = %v, want the key-limit error", len(long), err)
	}
}

// TestExpiryOnMiniflareTime measures expiry on Miniflare's clock: logical
// expiry is exact to the millisecond, and KV keeps the entry physically at
// least until then (60 s minimum, padding).
func TestExpiryOnMiniflareTime(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	const key = "expiring.example"
	if _, err := s.CompareAndSwap(ctx, key, driver.NoVersion, []byte("x"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	r := sibling(t, s)
	steps := []struct {
		advance         time.Duration // cumulative
		logical, stored bool
	}{
		{4999 * time.Millisecond, true, true},
		{5000 * time.Millisecond, false, true},
		{59 * time.Second, false, true},
		{65 * time.Second, false, false},
	}
	var at time.Duration
	for _, st := range steps {
		if err := srv.Advance(ctx, st.advance-at); err != nil {
			t.Fatal(err)
		}
		at = st.advance
		_, _, err := r.Get(ctx, key)
		if got := err == nil; got != st.logical || (err != nil && !errors.Is(err, driver.ErrNotFound)) {
			t.Errorf("%v after a 5 s write: Get = %v, want present=%v", at, err, st.logical)
		}
		_, _, found, err := srv.RawGet(ctx, s.prefix+key)
		if err != nil || found != st.stored {
			t.Errorf("%v after a 5 s write: stored in KV = %v (%v), want %v", at, found, err, st.stored)
		}
	}
}

// TestPhysicalNeverBeforeLogical writes with a writer clock δ ahead and reads
// with a reader clock δ behind (the worst case for reader-filtered expiry):
// the reader counts the entry live until TTL + 2δ of true time, so KV must
// still hold it then. With the padding removed, KV deletes it first — which
// is what the padding is for (DESIGN §2).
func TestPhysicalNeverBeforeLogical(t *testing.T) {
	const skew = time.Second
	const ttl = 90 * time.Second
	for _, tc := range []struct {
		name      string
		pad       time.Duration
		wantFound bool
	}{
		{"padded", 2*skew + time.Second, true},
		{"unpadded-loses-it", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			w := newStore(t, WithClockSkew(skew), WithClock(func() time.Time { return srv.Now().Add(skew) }))
			w.pad = tc.pad
			r := sibling(t, w, WithClockSkew(skew), WithClock(func() time.Time { return srv.Now().Add(-skew) }))
			if _, err := w.CompareAndSwap(ctx, "skewed.example", driver.NoVersion, []byte("x"), ttl); err != nil {
				t.Fatal(err)
			}
			// True time TTL + 2δ - 100 ms: the reader's clock says 100 ms
			// remain.
			if err := srv.Advance(ctx, ttl+2*skew-100*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			_, _, err := r.Get(ctx, "skewed.example")
			if found := err == nil; found != tc.wantFound {
				t.Errorf("reader Get %v into a %v TTL (writer +%v, reader -%v) = %v; want found=%v", ttl+2*skew-100*time.Millisecond, ttl, skew, skew, err, tc.wantFound)
			}
			if err := srv.Advance(ctx, 200*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if _, _, err := r.Get(ctx, "skewed.example"); !errors.Is(err, driver.ErrNotFound) {
				t.Errorf("reader Get once its clock passed the expiry = %v, want ErrNotFound", err)
			}
		})
	}
}

// countingClock returns a clock on Miniflare's time that moves 1 ms forward
// on every read, so each failure in a burst has its own instant.
func countingClock() func() time.Time {
	base := srv.Now()
	var n atomic.Int64
	return func() time.Time { return base.Add(time.Duration(n.Add(1)) * time.Millisecond) }
}

// TestBurstCoalesced fails one host from many goroutines at once. Miniflare
// answers a second write to a key within 1 s with 429; the store must send
// at most one write per second, and the stored record must hold every
// failure instant.
func TestBurstCoalesced(t *testing.T) {
	ctx := t.Context()
	if err := srv.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	s := newStore(t)
	clock := countingClock()
	b, err := kvbreaker.New(s, kvbreaker.Settings{FailureThreshold: 100, Clock: clock, CallTimeout: 30 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	const burst = 40
	start := time.Now()
	var wg sync.WaitGroup
	for range burst {
		wg.Go(func() {
			if err := b.Failure(ctx, "burst.example"); err != nil {
				t.Errorf("Failure = %v", err)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	st, err := srv.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raw, _, found, err := srv.RawGet(ctx, s.prefix+"burst.example")
	if err != nil || !found {
		t.Fatalf("RawGet = %v, %v", found, err)
	}
	value, _, _ := decodeEnvelope(raw)
	rec, err := record.DecodeRecord(value)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Failures) != burst {
		t.Errorf("stored record holds %d failure instants, want all %d", len(rec.Failures), burst)
	}
	if st.RateLimited != 0 {
		t.Errorf("Miniflare answered %d writes with 429: the store wrote one key more than once a second", st.RateLimited)
	}
	if st.Put > 1+int(elapsed/time.Second)+1 {
		t.Errorf("%d PUTs in %v for %d failures: not coalesced", st.Put, elapsed, burst)
	}
	t.Logf("%d concurrent failures of one host: %d PUTs, %d GETs, %v", burst, st.Put, st.Get, elapsed.Round(time.Millisecond))
}

// TestConcurrentWritesMerged writes two unrelated records to one key within
// the write interval, from callers that did not see each other (both pass
// NoVersion): the store merges them instead of keeping only the last.
func TestConcurrentWritesMerged(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	now := srv.Now().Truncate(time.Millisecond)
	a := record.EncodeRecord(record.Record{Failures: []time.Time{now.Add(-2 * time.Second), now}})
	b := record.EncodeRecord(record.Record{Failures: []time.Time{now.Add(-time.Second)}, RestrainedUntil: now.Add(time.Minute), Probing: true})
	// Occupy the key's write slot so both writes queue together.
	if _, err := s.CompareAndSwap(ctx, "merge.example", driver.NoVersion, record.EncodeRecord(record.Record{}), time.Hour); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	vers := make([]driver.Version, 2)
	for i, v := range [][]byte{a, b} {
		wg.Go(func() {
			var err error
			if vers[i], err = s.CompareAndSwap(ctx, "merge.example", 12345, v, time.Hour); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if vers[0] != vers[1] {
		t.Errorf("merged writes returned versions %d and %d, want the one version stored", vers[0], vers[1])
	}
	v, ver, err := sibling(t, s).Get(ctx, "merge.example")
	if err != nil || ver != vers[0] {
		t.Fatalf("Get = %d, %v", ver, err)
	}
	got, err := record.DecodeRecord(v)
	if err != nil {
		t.Fatal(err)
	}
	want := record.Record{Failures: []time.Time{now.Add(-2 * time.Second), now.Add(-time.Second), now}, RestrainedUntil: now.Add(time.Minute), Probing: true}
	if string(record.EncodeRecord(got)) != string(record.EncodeRecord(want)) {
		t.Errorf("stored %+v, want the merge %+v", got, want)
	}
}

// TestRateLimited throttles Miniflare (429, Retry-After: 1): reads fail at
// once or come from the cache, writes are retried after Retry-After, and a
// caller whose deadline comes first is answered at once while its write
// stays queued.
func TestRateLimited(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	if _, err := s.CompareAndSwap(ctx, "cached.example", driver.NoVersion, []byte("c"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := srv.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("read-fails-fast", func(t *testing.T) {
		if err := srv.Throttle(ctx, 1, time.Second); err != nil {
			t.Fatal(err)
		}
		// Counted, not timed: a retry by the SDK would be a second GET,
		// whatever the machine's speed.
		sent, _ := srv.Stats(ctx)
		_, _, err := s.Get(ctx, "other.example")
		var rl *RateLimitError
		if !errors.Is(err, ErrRateLimited) || !errors.As(err, &rl) {
			t.Fatalf("Get while throttled = %v, want ErrRateLimited", err)
		}
		if got, _ := srv.Stats(ctx); got.Get-sent.Get != 1 || got.Throttled-sent.Throttled != 1 {
			t.Errorf("throttled Get sent %d GETs (%d throttled), want 1: the SDK retried the 429 itself", got.Get-sent.Get, got.Throttled-sent.Throttled)
		}
		// During the backoff: no request at all, cached keys still answer.
		before, _ := srv.Stats(ctx)
		if _, _, err := s.Get(ctx, "other.example"); !errors.Is(err, ErrRateLimited) {
			t.Errorf("second Get during the backoff = %v, want ErrRateLimited", err)
		}
		if v, _, err := s.Get(ctx, "cached.example"); err != nil || string(v) != "c" {
			t.Errorf("cached Get during the backoff = %q, %v", v, err)
		}
		after, _ := srv.Stats(ctx)
		if after.Get != before.Get {
			t.Errorf("%d GETs sent during the backoff, want 0", after.Get-before.Get)
		}
	})

	t.Run("write-retried-after-retry-after", func(t *testing.T) {
		waitBackoff(t, s)
		if err := srv.Throttle(ctx, 1, time.Second); err != nil {
			t.Fatal(err)
		}
		// Waiting out Retry-After is a lower bound on the time, which load
		// cannot break; that the wait ended in one retry is counted, since
		// an upper bound on the time would be the machine's speed.
		sent, _ := srv.Stats(ctx)
		start := time.Now()
		ver, err := s.CompareAndSwap(ctx, "retried.example", driver.NoVersion, []byte("r"), time.Hour)
		elapsed := time.Since(start)
		if err != nil {
			t.Fatalf("CompareAndSwap through one 429 = %v", err)
		}
		if elapsed < 900*time.Millisecond {
			t.Errorf("CompareAndSwap through a 429 with Retry-After: 1 took %v, want at least about 1 s", elapsed)
		}
		if got, _ := srv.Stats(ctx); got.Put-sent.Put != 2 || got.Throttled-sent.Throttled != 1 {
			t.Errorf("CompareAndSwap through one 429 sent %d PUTs (%d throttled), want 2 (1)", got.Put-sent.Put, got.Throttled-sent.Throttled)
		}
		t.Logf("CompareAndSwap through a 429 with Retry-After: 1 took %v", elapsed)
		if _, got, err := sibling(t, s).Get(ctx, "retried.example"); err != nil || got != ver {
			t.Errorf("Get after the retried write = %d, %v; want %d", got, err, ver)
		}
	})

	t.Run("short-deadline-answered-at-once", func(t *testing.T) {
		waitBackoff(t, s)
		if err := srv.Throttle(ctx, 1, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Get(ctx, "trigger.example"); !errors.Is(err, ErrRateLimited) {
			t.Fatalf("Get while throttled = %v", err)
		}
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		// A caller that waited would end with its context's error, so
		// the queued *RateLimitError itself shows it was answered without
		// waiting; how long that took is the machine's speed.
		_, err := s.CompareAndSwap(short, "queued.example", driver.NoVersion, []byte("q"), time.Hour)
		var rl *RateLimitError
		if !errors.As(err, &rl) || !rl.Queued || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("CompareAndSwap with a deadline before the backoff ends = %v, want a queued *RateLimitError", err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if v, _, err := sibling(t, s).Get(ctx, "queued.example"); err != nil || string(v) != "q" {
			t.Errorf("the queued write did not land: Get = %q, %v", v, err)
		}
	})
}

// waitBackoff waits out s's 429 backoff (real time, bounded by Retry-After).
func waitBackoff(t *testing.T, s *tstore) {
	t.Helper()
	if until, limited := s.backingOff(); limited {
		time.Sleep(time.Until(until))
	}
}

// TestDeadEndpointFailsFast points the store at a closed port: with one SDK
// retry a read fails within a few seconds, where the SDK's default of ten
// retries with backoff would block for minutes.
func TestDeadEndpointFailsFast(t *testing.T) {
	dead := "http://" + backendtest.ClosedPort(t) + "/client/v4/"
	for _, tc := range []struct {
		retries int
		within  time.Duration
	}{{0, time.Second}, {DefaultMaxRetries, 3 * time.Second}} {
		t.Run(fmt.Sprintf("retries-%d", tc.retries), func(t *testing.T) {
			s, err := New(kv.NewKVService(option.WithBaseURL(dead), option.WithAPIToken("secret-token-xyz")), "acct", "ns", WithMaxRetries(tc.retries))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, _, err = s.Get(t.Context(), "dead.example")
			d := time.Since(start)
			if err == nil || errors.Is(err, driver.ErrNotFound) {
				t.Fatalf("Get from a dead endpoint = %v", err)
			}
			if d > tc.within {
				t.Errorf("Get from a dead endpoint took %v, want under %v", d, tc.within)
			}
			if strings.Contains(err.Error(), "secret-token-xyz") {
				t.Errorf("error leaks the token: %v", err)
			}
			t.Logf("retries %d: failed after %v: %v", tc.retries, d.Round(time.Millisecond), err)
		})
	}
}

// TestErrorsNeverCarryToken uses a wrong token: the 403 comes back as a
// *driver.OpError, "cloudflarekv: <op> <key>: <cause>" with one
// "cloudflarekv: " prefix, without the token, and not as ErrNotFound.
func TestErrorsNeverCarryToken(t *testing.T) {
	const token = "wrong-token-5f3a9c"
	c := kv.NewKVService(option.WithBaseURL(srv.BaseURL()), option.WithAPIToken(token))
	s, err := New(c, srv.AccountID, srv.NamespaceID)
	if err != nil {
		t.Fatal(err)
	}
	_, _, getErr := s.Get(t.Context(), "auth.example")
	_, putErr := s.CompareAndSwap(t.Context(), "auth.example", driver.NoVersion, []byte("x"), time.Hour)
	for op, err := range map[string]error{"get": getErr, "compare-and-swap": putErr} {
		if err == nil || errors.Is(err, driver.ErrNotFound) {
			t.Errorf("%s with a wrong token = %v, want an error", op, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), `cloudflarekv: `+op+` auth.example: HTTP 403`) {
			t.Errorf("%s error = %q, want cloudflarekv: %s auth.example: HTTP 403 …", op, err, op)
		}
		if oe, ok := err.(*driver.OpError); !ok || oe.Backend != "cloudflarekv" || oe.Op != op || oe.Key != "auth.example" {
			t.Errorf("%s error = %#v, want a *driver.OpError", op, err)
		}
		if n := strings.Count(err.Error(), "cloudflarekv: "); n != 1 {
			t.Errorf("%s error = %q: %d \"cloudflarekv: \" prefixes, want 1", op, err, n)
		}
		if strings.Contains(err.Error(), token) {
			t.Errorf("%s error leaks the token: %v", op, err)
		}
	}
}

// TestNewValidates reports every bad argument and option at once, each a
// *driver.OptionError: "cloudflarekv: invalid <option>: <value>: <what to
// change>".
func TestNewValidates(t *testing.T) {
	_, err := New(nil, "", "ns/x", WithClockSkew(-time.Second))
	if err == nil {
		t.Fatal("New with bad options succeeded")
	}
	for _, want := range []string{
		"cloudflarekv: invalid client: nil: pass cloudflare.Client's KV field",
		`cloudflarekv: invalid account ID: "": pass the account's ID`,
		`cloudflarekv: invalid namespace ID: "ns/x": pass the namespace's ID`,
		"cloudflarekv: invalid WithClockSkew: -1s: set a positive bound",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New's error does not mention %q: %v", want, err)
		}
	}
	if _, ok := errors.AsType[*driver.OptionError](err); !ok {
		t.Errorf("New's error is not a *driver.OptionError: %v", err)
	}
	if lines := strings.Split(err.Error(), "\n"); len(lines) != 4 {
		t.Errorf("New's error has %d lines, want one per problem (4): %q", len(lines), err)
	}
}

// TestReadCache checks the budget the cache saves: repeated checks of a
// healthy host within the freshness cost one GET, concurrent ones share it,
// and with the cache off every check is a GET.
func TestReadCache(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		name     string
		opts     []Option
		wantGets int
	}{
		{"cached", nil, 1},
		{"cache-off", []Option{WithCache(0, 0)}, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, tc.opts...)
			// The background clock check's GET is not a read of a record:
			// this test counts those only.
			br, err := kvbreaker.New(s, kvbreaker.Settings{Clock: srv.Now, Logger: quiet, SkipClockCheck: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.ResetStats(ctx); err != nil {
				t.Fatal(err)
			}
			for range 20 {
				if v, err := br.Allow(ctx, "healthy.example", time.Time{}); err != nil || v.Decision != kvbreaker.Send {
					t.Fatalf("Allow = %v, %v", v, err)
				}
			}
			st, err := srv.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Get != tc.wantGets {
				t.Errorf("20 checks of a healthy host sent %d GETs, want %d", st.Get, tc.wantGets)
			}
		})
	}
}

// TestSequentialWritesReplace checks that writes computed from the store's
// own previous write replace it rather than merge: a success between two
// failures wipes the first one.
func TestSequentialWritesReplace(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	br, err := kvbreaker.New(s, kvbreaker.Settings{Clock: countingClock(), CallTimeout: 10 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	const host = "sequential.example"
	for _, step := range []func(context.Context, string) error{br.Failure, br.Failure, br.Success, br.Failure} {
		if err := step(ctx, host); err != nil {
			t.Fatal(err)
		}
	}
	v, _, err := sibling(t, s).Get(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := record.DecodeRecord(v)
	if err != nil || len(rec.Failures) != 1 {
		t.Errorf("after failure, failure, success, failure: stored %+v, %v; want the last failure only", rec, err)
	}
}

// TestWrongNamespaceIsAnError: a 404 for a missing namespace must not read as
// an absent key (an empty store would silently disable the breaker).
func TestWrongNamespaceIsAnError(t *testing.T) {
	s, err := New(client(), srv.AccountID, "no-such-namespace")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Get(t.Context(), "host.example")
	if err == nil || errors.Is(err, driver.ErrNotFound) || !strings.Contains(err.Error(), "HTTP 404") {
		t.Errorf("Get in a missing namespace = %v, want an HTTP 404 error, not ErrNotFound", err)
	}
}

// TestLostWriteIsLogged: a write whose caller stopped waiting and that the
// API keeps refusing (429 on every attempt) is given up after
// DefaultMaxAttempts and reported through the logger, not dropped silently.
func TestLostWriteIsLogged(t *testing.T) {
	ctx := t.Context()
	var logged strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logged.Write(p)
	}), nil))
	s := newStore(t, WithLogger(log))
	if err := srv.Throttle(ctx, 100, time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Throttle(context.Background(), 0, time.Second) })
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := s.CompareAndSwap(short, "lost.example", driver.NoVersion, []byte("x"), time.Hour); !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrRateLimited) {
		t.Fatalf("CompareAndSwap = %v, want the deadline or rate-limit error", err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logged.String(), "write lost") || !strings.Contains(logged.String(), "lost.example") {
		t.Errorf("log = %q, want a write-lost warning naming the key", logged.String())
	}
	waitBackoff(t, s)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
