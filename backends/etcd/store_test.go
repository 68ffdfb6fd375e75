package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

func mustCAS(t *testing.T, s driver.Store, key string, old driver.Version, val string, ttl time.Duration) driver.Version {
	t.Helper()
	v, err := s.CompareAndSwap(t.Context(), key, old, []byte(val), ttl)
	if err != nil {
		t.Fatalf("CompareAndSwap(%q, %d, %q): %v", key, old, val, err)
	}
	if v == driver.NoVersion {
		t.Fatalf("CompareAndSwap(%q) returned NoVersion", key)
	}
	return v
}

func wantConflict(t *testing.T, err error, val string, ver driver.Version) {
	t.Helper()
	if !errors.Is(err, driver.ErrConflict) {
		t.Fatalf("err = %v, want a conflict", err)
	}
	ce, ok := errors.AsType[*driver.ConflictError](err)
	if !ok {
		t.Fatalf("err = %T %v, want a *driver.ConflictError", err, err)
	}
	if ce.Version != ver || string(ce.Value) != val {
		t.Errorf("conflict carries (%q, %d), want (%q, %d)", ce.Value, ce.Version, val, ver)
	}
}

const longTTL = time.Minute

func TestGetAbsent(t *testing.T) {
	s := newStore(t)
	_, v, err := s.Get(t.Context(), "nobody.example")
	if !errors.Is(err, driver.ErrNotFound) || v != driver.NoVersion {
		t.Fatalf("Get(absent) = version %d, %v; want NoVersion, ErrNotFound", v, err)
	}
}

func TestCreateOnly(t *testing.T) {
	s := newStore(t)
	v1 := mustCAS(t, s, "h", driver.NoVersion, "one", longTTL)
	got, v, err := s.Get(t.Context(), "h")
	if err != nil || string(got) != "one" || v != v1 {
		t.Fatalf("Get = %q, %d, %v; want one, %d", got, v, err, v1)
	}
	_, err = s.CompareAndSwap(t.Context(), "h", driver.NoVersion, []byte("two"), longTTL)
	wantConflict(t, err, "one", v1)
}

func TestSwapAndStaleVersion(t *testing.T) {
	s := newStore(t)
	v1 := mustCAS(t, s, "h", driver.NoVersion, "one", longTTL)
	v2 := mustCAS(t, s, "h", v1, "two", longTTL)
	if v2 <= v1 {
		t.Fatalf("second version %d not after first %d", v2, v1)
	}
	_, err := s.CompareAndSwap(t.Context(), "h", v1, []byte("stale"), longTTL)
	wantConflict(t, err, "two", v2)
	got, v, _ := s.Get(t.Context(), "h")
	if string(got) != "two" || v != v2 {
		t.Errorf("after a lost swap Get = %q, %d; want two, %d", got, v, v2)
	}
}

func TestSwapOnAbsentKeyConflicts(t *testing.T) {
	s := newStore(t)
	other := mustCAS(t, s, "other", driver.NoVersion, "x", longTTL) // a real revision of another key
	_, err := s.CompareAndSwap(t.Context(), "h", other, []byte("v"), longTTL)
	wantConflict(t, err, "", driver.NoVersion)
	_, err = s.CompareAndSwap(t.Context(), "h", math.MaxUint64, []byte("v"), longTTL)
	wantConflict(t, err, "", driver.NoVersion)
}

func TestCompareAndDelete(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	if err := s.CompareAndDelete(ctx, "h", driver.NoVersion); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("delete absent with NoVersion: %v, want ErrNotFound", err)
	}
	if err := s.CompareAndDelete(ctx, "h", 12345); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("delete absent with a version: %v, want ErrNotFound", err)
	}
	v1 := mustCAS(t, s, "h", driver.NoVersion, "one", longTTL)
	v2 := mustCAS(t, s, "h", v1, "two", longTTL)
	wantConflict(t, s.CompareAndDelete(ctx, "h", v1), "two", v2)
	wantConflict(t, s.CompareAndDelete(ctx, "h", driver.NoVersion), "two", v2)
	wantConflict(t, s.CompareAndDelete(ctx, "h", math.MaxUint64), "two", v2)
	if err := s.CompareAndDelete(ctx, "h", v2); err != nil {
		t.Fatalf("delete with current version: %v", err)
	}
	if _, _, err := s.Get(ctx, "h"); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("Get after delete: %v, want ErrNotFound", err)
	}
	if err := s.CompareAndDelete(ctx, "h", v2); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
	// A deleted key can be created again.
	mustCAS(t, s, "h", driver.NoVersion, "three", longTTL)
}

func TestInvalidTTL(t *testing.T) {
	s := newStore(t)
	for _, ttl := range []time.Duration{0, -time.Second} {
		_, err := s.CompareAndSwap(t.Context(), "h", driver.NoVersion, []byte("v"), ttl)
		if err == nil || errors.Is(err, driver.ErrConflict) || !strings.Contains(err.Error(), "not positive") {
			t.Errorf("ttl %v: err = %v, want a non-conflict error about the ttl", ttl, err)
		}
	}
}

// hostileKeys must round-trip and never collide.
var hostileKeys = []string{
	"example.com", "example.com/", "example.com%2F", "example.com/x", "/", "//", "%", "%00", "#", "?a=b",
	"a b", "ü.example", "例え.テスト", "\U0001F600", "..", ".", "*", "\\", "'\"", "a\u00a0b",
	strings.Repeat("x", driver.MaxKeyLen), strings.Repeat("é", driver.MaxKeyLen/2),
}

func TestHostileKeysRoundTrip(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	for i, k := range hostileKeys {
		if err := driver.ValidateKey(k); err != nil {
			t.Fatalf("test key %q is not valid: %v", k, err)
		}
		mustCAS(t, s, k, driver.NoVersion, fmt.Sprint(i), longTTL)
	}
	for i, k := range hostileKeys {
		got, _, err := s.Get(ctx, k)
		if err != nil || string(got) != fmt.Sprint(i) {
			t.Errorf("Get(%q) = %q, %v; want %d", k, got, err, i)
		}
		// The etcd key is exactly prefix+key, with kvbreaker.Prefixed's
		// escapes.
		resp, err := s.Client().Get(ctx, s.prefix+esc(k))
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != fmt.Sprint(i) {
			t.Errorf("raw etcd key %q not found as written: %v", s.prefix+esc(k), err)
		}
	}
	resp, err := s.Client().Get(ctx, s.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != int64(len(hostileKeys)) {
		t.Errorf("prefix holds %d keys (%v), want %d", resp.Count, err, len(hostileKeys))
	}
}

func TestPrefixesIsolate(t *testing.T) {
	a, b := newStore(t), newStore(t)
	mustCAS(t, a, "h", driver.NoVersion, "a", longTTL)
	if _, _, err := b.Get(t.Context(), "h"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("store b sees store a's key: %v", err)
	}
	mustCAS(t, b, "h", driver.NoVersion, "b", longTTL)
	got, _, _ := a.Get(t.Context(), "h")
	if string(got) != "a" {
		t.Errorf("store a's key reads %q after store b wrote, want a", got)
	}
}

// leaseTTL returns the granted TTL of the lease attached to key.
func leaseTTL(t *testing.T, s *testStore, key string) int64 {
	t.Helper()
	resp, err := s.Client().Get(t.Context(), s.prefix+key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("raw get %q: %v", key, err)
	}
	id := clientv3.LeaseID(resp.Kvs[0].Lease)
	if id == clientv3.NoLease {
		t.Fatalf("key %q has no lease", key)
	}
	ttl, err := s.Client().TimeToLive(t.Context(), id)
	if err != nil {
		t.Fatalf("TimeToLive: %v", err)
	}
	return ttl.GrantedTTL
}

func TestTTLRoundsUpToSecondsAndServerMinimum(t *testing.T) {
	s := newStore(t)
	if got := s.MinTTL(); got != time.Second {
		t.Fatalf("learnt MinTTL %v; the fixture's 100 ms election timeout gives 1 s", got)
	}
	for _, tc := range []struct {
		name string
		ttl  time.Duration
		want int64
	}{
		{"sub-second-raised-to-minimum", 300 * time.Millisecond, 1},
		{"one-and-a-half-rounds-up", 1500 * time.Millisecond, 2},
		{"whole-seconds-kept", 7 * time.Second, 7},
		{"pooled-ttl-adds-slack", 100 * time.Second, 105},
		{"slack-capped", 30*time.Minute + 5*time.Second, 1805 + 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustCAS(t, s, tc.name, driver.NoVersion, "v", tc.ttl)
			if got := leaseTTL(t, s, tc.name); got != tc.want {
				t.Errorf("ttl %v: lease granted for %d s, want %d s", tc.ttl, got, tc.want)
			}
		})
	}
	// A declared minimum above the server's raises every lease.
	s3 := newStore(t, etcd.WithMinTTL(3*time.Second))
	mustCAS(t, s3, "h", driver.NoVersion, "v", time.Second)
	if got := leaseTTL(t, s3, "h"); got != 3 {
		t.Errorf("WithMinTTL(3s), ttl 1s: lease of %d s, want 3", got)
	}
	if got := s3.Traits().Expiry.MinTTL; got != 3*time.Second {
		t.Errorf("Traits MinTTL %v, want 3s", got)
	}
}

func TestTraits(t *testing.T) {
	s := newStore(t)
	want := driver.Traits{
		Atomic: true,
		Expiry: driver.ExpiryModel{
			Kind:        driver.ExpiryRelative,
			Granularity: time.Second,
			MinTTL:      time.Second,
			Late:        500*time.Millisecond + 60*time.Second,
		},
	}
	if got := s.Traits(); got != want {
		t.Errorf("Traits() = %+v, want %+v", got, want)
	}
	unpooled := newStore(t, etcd.WithLeaseReuse(0, 0))
	if got := unpooled.Traits().Expiry.Late; got != 500*time.Millisecond {
		t.Errorf("without pooling Late = %v, want 500ms", got)
	}
	// The derived Breaker TTL is accepted with default settings.
	if _, err := kvbreaker.New(s, kvbreaker.Settings{}); err != nil {
		t.Errorf("kvbreaker.New with default settings: %v", err)
	}
}

// TestExpiryMeasured writes with short TTLs and watches the keys vanish on
// the server's clock: never before the TTL, and no later than the declared
// Late after it (plus the polling interval).
func TestExpiryMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("measures real expiry (about 3 s); skipped with -short")
	}
	s := newStore(t)
	late := s.Traits().Expiry.Late
	const poll = 20 * time.Millisecond
	var wg sync.WaitGroup
	for _, ttl := range []time.Duration{time.Second, 2 * time.Second} {
		wg.Go(func() {
			key := ttl.String()
			start := time.Now()
			mustCAS(t, s, key, driver.NoVersion, "v", ttl)
			written := time.Now()
			for {
				_, _, err := s.Get(t.Context(), key)
				now := time.Now()
				if errors.Is(err, driver.ErrNotFound) {
					if early := start.Add(ttl).Sub(now); early > 0 {
						t.Errorf("ttl %v: key gone %v early", ttl, early)
					}
					if over := now.Sub(written.Add(ttl)); over > late+poll+100*time.Millisecond {
						t.Errorf("ttl %v: key outlived its ttl by %v; declared Late %v", ttl, over, late)
					}
					t.Logf("ttl %v: gone %v after the write returned", ttl, now.Sub(written))
					return
				}
				if err != nil {
					t.Errorf("Get: %v", err)
					return
				}
				if now.Sub(written) > ttl+late+5*time.Second {
					t.Errorf("ttl %v: key still there after %v", ttl, now.Sub(written))
					return
				}
				time.Sleep(poll) // polling a real server's clock
			}
		})
	}
	wg.Wait()
}

// TestConcurrentCASCounts has 16 goroutines increment one counter through
// compare-and-swap, retrying from the value a lost swap returns (no Get):
// with an atomic store no increment is lost.
func TestConcurrentCASCounts(t *testing.T) {
	s := newStore(t)
	const workers, each = 16, 25
	var wg sync.WaitGroup
	var mu sync.Mutex
	conflicts := 0
	for range workers {
		wg.Go(func() {
			var cur []byte
			ver := driver.NoVersion
			for range each {
				for {
					n := 0
					if cur != nil {
						fmt.Sscan(string(cur), &n)
					}
					next := []byte(fmt.Sprint(n + 1))
					v, err := s.CompareAndSwap(t.Context(), "counter", ver, next, longTTL)
					if err == nil {
						cur, ver = next, v
						break
					}
					ce, ok := errors.AsType[*driver.ConflictError](err)
					if !ok {
						t.Errorf("CAS: %v", err)
						return
					}
					mu.Lock()
					conflicts++
					mu.Unlock()
					cur, ver = ce.Value, ce.Version
				}
			}
		})
	}
	wg.Wait()
	got, _, err := s.Get(t.Context(), "counter")
	if err != nil || string(got) != fmt.Sprint(workers*each) {
		t.Fatalf("counter = %q (%v), want %d", got, err, workers*each)
	}
	st := s.Stats()
	t.Logf("%d increments, %d conflicts, stats %+v", workers*each, conflicts, st)
	if st.Conflicts != uint64(conflicts) || st.Writes != uint64(workers*each+conflicts) {
		t.Errorf("stats %+v; want %d conflicts, %d writes", st, conflicts, workers*each+conflicts)
	}
}

// TestLeasePooling writes 1,000 records with the Breaker's default TTL
// (30 min 5 s): they share one lease, as etcd itself reports.
func TestLeasePooling(t *testing.T) {
	s := newStore(t)
	ttl := kvbreaker.Settings{}.WithDefaults().RecoveryDelay + 5*time.Second // the default StateTTL: TTLMargin 5 s
	const writes = 1000
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < writes; i += 8 {
				if _, err := s.CompareAndSwap(t.Context(), fmt.Sprintf("host-%d.example", i), driver.NoVersion, []byte("v"), ttl); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	st := s.Stats()
	t.Logf("%d writes, %d grants, %d reused: %.1f grants per 1,000 writes", st.Writes, st.Grants, st.Reused, st.GrantsPer1000Writes())
	if st.Writes != writes || st.Grants != 1 || st.Reused != writes-1 {
		t.Errorf("stats %+v; want %d writes on 1 grant", st, writes)
	}
	resp, err := s.Client().Get(t.Context(), s.prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	leases := map[int64]int{}
	for _, kv := range resp.Kvs {
		leases[kv.Lease]++
	}
	if len(leases) != 1 || len(resp.Kvs) != writes {
		t.Errorf("%d keys on %d leases, want %d on 1", len(resp.Kvs), len(leases), writes)
	}
	for id := range leases {
		ttl, err := s.Client().TimeToLive(t.Context(), clientv3.LeaseID(id), clientv3.WithAttachedKeys())
		if err != nil || len(ttl.Keys) != writes {
			t.Errorf("lease %x has %d keys attached (%v), want %d", id, len(ttl.Keys), err, writes)
		}
		s.Client().Revoke(t.Context(), clientv3.LeaseID(id))
	}
}

// within fails t unless f returns within limit.
func within[T any](t *testing.T, limit time.Duration, what string, f func() T) T {
	t.Helper()
	start := time.Now()
	v := f()
	if d := time.Since(start); d > limit {
		t.Errorf("%s took %v, limit %v", what, d, limit)
	}
	return v
}

// TestDeadEndpointFailsWithinDeadline: with nothing listening, every call
// returns by its context's deadline (the only bound: the Store has no
// timeout of its own) with an *driver.OpError naming the operation and
// the key, whose cause is an *driver.UnreachableError naming the endpoint.
func TestDeadEndpointFailsWithinDeadline(t *testing.T) {
	addr := backendtest.ClosedPort(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + addr}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	s, err := etcd.New(cli, etcd.WithMinTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	const deadline = 300 * time.Millisecond
	const slack = time.Second // scheduling on a loaded 2-core machine
	for op, call := range storeOps(s, "h.example") {
		t.Run(op, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), deadline)
			defer cancel()
			err := within(t, deadline+slack, op, func() error { return call(ctx) })
			if err == nil || errors.Is(err, driver.ErrConflict) || errors.Is(err, driver.ErrNotFound) {
				t.Fatalf("%s on a dead endpoint: %v", op, err)
			}
			oe, ok := errors.AsType[*driver.OpError](err)
			if !ok || oe.Backend != "etcd" || oe.Op != op {
				t.Fatalf("error %T %v is not an *driver.OpError for %s", err, err, op)
			}
			// No endpoint accepts a connection: the cause says so and where.
			if want := "cannot reach etcd at http://" + addr + ": connection refused"; !strings.HasPrefix(err.Error(), "etcd: "+op+" ") || !strings.HasSuffix(err.Error(), want) || !errors.Is(err, driver.ErrUnreachable) {
				t.Errorf("error %q: want etcd: %s <key>: %s, matching driver.ErrUnreachable", err, op, want)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %q does not unwrap to the context's", err)
			}
			if n := strings.Count(err.Error(), "etcd: "); n != 1 {
				t.Errorf("error %q says \"etcd: \" %d times", err, n)
			}
		})
	}
}

func TestDialHidesCredentialsAndFailsInTime(t *testing.T) {
	addr := backendtest.ClosedPort(t)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	err := within(t, 1500*time.Millisecond, "dial of a dead endpoint", func() error {
		_, err := etcd.Dial(ctx, []string{"http://kvuser:s3cret@" + addr})
		return err
	})
	if err == nil {
		t.Fatal("Dial of a dead endpoint succeeded")
	}
	if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "kvuser") {
		t.Errorf("error shows credentials: %v", err)
	}
	if !strings.Contains(err.Error(), addr) {
		t.Errorf("error %q does not name the endpoint %s", err, addr)
	}
}

func TestDialAndClose(t *testing.T) {
	eps := []string{strings.Replace(endpoints[0], "http://", "http://user:pw@", 1)}
	s, err := etcd.Dial(t.Context(), eps)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	if got := s.MinTTL(); got != time.Second {
		t.Errorf("MinTTL %v, want 1s", got)
	}
	key := uniquePrefix(t) + "h"
	v := mustCAS(t, s, key, driver.NoVersion, "v", longTTL)
	if _, ver, err := s.Get(t.Context(), key); err != nil || ver != v {
		t.Fatalf("Get: %d %v", ver, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, _, err = s.Get(t.Context(), key)
	if !errors.Is(err, etcd.ErrClosed) {
		t.Errorf("Get after Close: %v, want ErrClosed", err)
	}
	// Dial owned the client: it is closed too.
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := s.Client().Get(ctx, "x"); err == nil {
		t.Error("the dialled client still works after Close")
	}
}

// TestNewKeepsCallersClient: Close leaves the caller's client working, and
// the Store keys exactly as given (no prefix of its own).
func TestNewKeepsCallersClient(t *testing.T) {
	cli := newClient(t)
	s, err := etcd.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	key := uniquePrefix(t) + "raw.example"
	mustCAS(t, s, key, driver.NoVersion, "v", longTTL)
	if resp, err := cli.Get(t.Context(), key); err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Errorf("etcd key %q not written as given: %v", key, err)
	}
	s.Close()
	if _, err := cli.Get(t.Context(), "x"); err != nil {
		t.Errorf("caller's client broken by Store.Close: %v", err)
	}
}
