package etcd

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func defaultPolicy() reusePolicy {
	return reusePolicy{fraction: DefaultReuseFraction, maxSlack: int64(DefaultMaxReuse / time.Second), maxKeys: DefaultMaxKeysPerLease}
}

func TestReuseSlack(t *testing.T) {
	p := defaultPolicy()
	for _, tc := range []struct {
		name  string
		ttl   int64
		slack int64
	}{
		{"one-second-no-slack", 1, 0},
		{"nineteen-seconds-no-slack", 19, 0},
		{"twenty-seconds-one", 20, 1},
		{"hundred-seconds-five", 100, 5},
		{"thirty-min-capped-at-60", 1805, 60},
		{"day-capped-at-60", 86400, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.slack(tc.ttl); got != tc.slack {
				t.Errorf("slack(%d) = %d, want %d", tc.ttl, got, tc.slack)
			}
			if got := p.grantTTL(tc.ttl); got != tc.ttl+tc.slack {
				t.Errorf("grantTTL(%d) = %d, want %d", tc.ttl, got, tc.ttl+tc.slack)
			}
		})
	}
	off := reusePolicy{fraction: 0, maxSlack: 60, maxKeys: 10}
	if got := off.slack(86400); got != 0 {
		t.Errorf("fraction 0: slack = %d, want 0", got)
	}
	capped := reusePolicy{fraction: 0.5, maxSlack: 0, maxKeys: 10}
	if got := capped.slack(86400); got != 0 {
		t.Errorf("max 0: slack = %d, want 0", got)
	}
}

func TestReusable(t *testing.T) {
	sec := func(n int) time.Duration { return time.Duration(n) * time.Second }
	p := defaultPolicy()
	const ttl = 1805 // 30 min 5 s, the Breaker's default StateTTL; slack 60 s
	granted := pooledLease{id: 7, expires: t0.Add(sec(ttl + 60)), attached: 1}
	for _, tc := range []struct {
		name   string
		policy reusePolicy
		lease  pooledLease
		now    time.Time
		ttl    int64
		want   bool
	}{
		{"just-granted", p, granted, t0, ttl, true},
		{"half-way-through-slack", p, granted, t0.Add(sec(30)), ttl, true},
		{"end-of-slack-exactly-ttl-left", p, granted, t0.Add(sec(60)), ttl, true},
		{"past-slack-would-expire-early", p, granted, t0.Add(sec(60) + time.Millisecond), ttl, false},
		{"no-lease", p, pooledLease{}, t0, ttl, false},
		{"clock-went-back-too-much-life", p, granted, t0.Add(-sec(1)), ttl, false},
		{"longer-ttl-would-outlive-lease", p, granted, t0, ttl + 61, false},
		{"shorter-ttl-too-much-extra-life", p, granted, t0, ttl - 61, false},
		{"shorter-ttl-within-slack-later", p, granted, t0.Add(sec(1)), ttl - 1, true},
		{"shorter-ttl-one-second-too-much-life", p, granted, t0, ttl - 1, false},
		{"max-keys-reached", reusePolicy{fraction: 0.05, maxSlack: 60, maxKeys: 3},
			pooledLease{id: 7, expires: granted.expires, attached: 3}, t0, ttl, false},
		{"below-max-keys", reusePolicy{fraction: 0.05, maxSlack: 60, maxKeys: 3},
			pooledLease{id: 7, expires: granted.expires, attached: 2}, t0, ttl, true},
		{"short-ttl-no-slack-later", p, pooledLease{id: 7, expires: t0.Add(sec(2)), attached: 1}, t0.Add(time.Millisecond), 2, false},
		{"pooling-off", reusePolicy{maxKeys: 1000}, pooledLease{id: 7, expires: t0.Add(sec(ttl)), attached: 1}, t0.Add(time.Millisecond), ttl, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.policy.reusable(tc.lease, tc.now, tc.ttl); got != tc.want {
				t.Errorf("reusable(%+v, now=t0%+v, ttl=%d) = %v, want %v", tc.lease, tc.now.Sub(t0), tc.ttl, got, tc.want)
			}
			// The promise behind any true answer: the key lives at least
			// ttl, and at most ttl+slack.
			if tc.policy.reusable(tc.lease, tc.now, tc.ttl) {
				life := tc.lease.expires.Sub(tc.now)
				if life < sec(int(tc.ttl)) || life > sec(int(tc.ttl+tc.policy.slack(tc.ttl))) {
					t.Errorf("reused lease gives the key %v for a %ds ttl", life, tc.ttl)
				}
			}
		})
	}
}

// fakeGrants is a grant function that counts calls and can block or fail.
type fakeGrants struct {
	n       atomic.Int64
	release chan struct{} // if non-nil, grants wait for it
	fail    atomic.Bool
}

func (f *fakeGrants) grant(ctx context.Context, ttlSec int64) (clientv3.LeaseID, int64, error) {
	if f.release != nil {
		select {
		case <-f.release:
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
	}
	if f.fail.Load() {
		return 0, 0, errors.New("grant refused")
	}
	return clientv3.LeaseID(f.n.Add(1)), ttlSec, nil
}

func newTestPool(f *fakeGrants) *leasePool {
	return &leasePool{policy: defaultPolicy(), clock: time.Now, grant: f.grant, slots: map[int64]*leaseSlot{}}
}

func TestPoolReusesAndRegrants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeGrants{}
		p := newTestPool(f)
		ctx := t.Context()
		first, granted, err := p.get(ctx, 1805)
		if err != nil || !granted {
			t.Fatalf("first get: id %v granted %v err %v", first, granted, err)
		}
		for range 999 {
			id, granted, err := p.get(ctx, 1805)
			if err != nil || granted || id != first {
				t.Fatalf("get within slack: id %v granted %v err %v, want reuse of %v", id, granted, err, first)
			}
		}
		// The 1,001st write exceeds DefaultMaxKeysPerLease.
		id, granted, _ := p.get(ctx, 1805)
		if !granted || id == first {
			t.Fatalf("write past max keys reused lease %v", id)
		}
		// Another TTL has its own lease.
		other, granted, _ := p.get(ctx, 600)
		if !granted || other == id {
			t.Fatalf("ttl 600 got lease %v (granted %v), want a new one", other, granted)
		}
		// Past the slack, a new lease.
		time.Sleep(61 * time.Second)
		again, granted, _ := p.get(ctx, 1805)
		if !granted || again == id {
			t.Fatalf("after slack got %v (granted %v), want a new lease", again, granted)
		}
		if got := f.n.Load(); got != 4 {
			t.Errorf("grants = %d, want 4", got)
		}
	})
}

func TestPoolConcurrentMissesShareOneGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeGrants{release: make(chan struct{})}
		p := newTestPool(f)
		var wg sync.WaitGroup
		ids := make([]clientv3.LeaseID, 32)
		for i := range ids {
			wg.Go(func() {
				id, _, err := p.get(t.Context(), 1805)
				if err != nil {
					t.Error(err)
				}
				ids[i] = id
			})
		}
		synctest.Wait() // one goroutine grants, the rest wait for it
		close(f.release)
		wg.Wait()
		if got := f.n.Load(); got != 1 {
			t.Errorf("32 concurrent misses made %d grants, want 1", got)
		}
		for i, id := range ids {
			if id != ids[0] {
				t.Errorf("goroutine %d got lease %v, others %v", i, id, ids[0])
			}
		}
	})
}

func TestPoolWaiterHonoursItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeGrants{release: make(chan struct{})}
		p := newTestPool(f)
		go p.get(t.Context(), 1805) // the granter, blocked until release
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		_, _, err := p.get(ctx, 1805)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("waiter err = %v, want deadline exceeded", err)
		}
		if waited := time.Since(start); waited != time.Second {
			t.Errorf("waiter returned after %v, want its 1 s deadline", waited)
		}
		close(f.release)
	})
}

func TestPoolFailedGrantIsRetriedByNextWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeGrants{}
		f.fail.Store(true)
		p := newTestPool(f)
		if _, _, err := p.get(t.Context(), 1805); err == nil {
			t.Fatal("get with failing grant: no error")
		}
		f.fail.Store(false)
		id, granted, err := p.get(t.Context(), 1805)
		if err != nil || !granted || id == clientv3.NoLease {
			t.Fatalf("after grant recovers: id %v granted %v err %v", id, granted, err)
		}
		p.forget(1805, id)
		id2, granted, _ := p.get(t.Context(), 1805)
		if !granted || id2 == id {
			t.Errorf("after forget: got %v granted %v, want a fresh lease", id2, granted)
		}
	})
}

func TestPoolBoundsSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTestPool(&fakeGrants{})
		for ttl := int64(1); ttl <= 3*maxPoolEntries; ttl++ {
			if _, _, err := p.get(t.Context(), ttl); err != nil {
				t.Fatal(err)
			}
			if len(p.slots) > maxPoolEntries {
				t.Fatalf("pool holds %d slots, bound %d", len(p.slots), maxPoolEntries)
			}
		}
	})
}

func TestRedactEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:secret@etcd-0:2379":        "https://etcd-0:2379",
		"http://127.0.0.1:2379":                  "http://127.0.0.1:2379",
		"root:pw@10.0.0.1:2379":                  "10.0.0.1:2379",
		"unix://a@/tmp/etcd.sock":                "unix:///tmp/etcd.sock",
		"etcd:2379":                              "etcd:2379",
		"https://u:p@h:1/path":                   "https://h:1/path",
		"http://127.0.0.1:2379/?password=secret": "http://127.0.0.1:2379",
		"etcd:2379?token=secret#frag":            "etcd:2379",
	} {
		if got := redactEndpoint(in); got != want {
			t.Errorf("redactEndpoint(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestOptionsValidated: every invalid option is a *driver.OptionError in
// the one wording, all of them joined, so each names its option (one
// error under "etcd: invalid options:" would leave the caller to guess
// which).
func TestOptionsValidated(t *testing.T) {
	_, err := newOptions([]Option{WithLeaseReuse(-1, -time.Second), WithMaxKeysPerLease(0), WithMinTTL(-1)}, &adapter.Problems{Backend: backend}, true)
	want := []string{
		"etcd: invalid WithLeaseReuse fraction: -1: give a share of the TTL from 0 to 1",
		"etcd: invalid WithLeaseReuse maximum: -1s: give 0 (no pooling) or a positive duration",
		"etcd: invalid WithMaxKeysPerLease: 0: give 1 or more",
		"etcd: invalid WithMinTTL: -1ns: give 0 (ask the server) or a positive duration",
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Fatalf("error:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
	var n int
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		if oe, ok := e.(*driver.OptionError); ok && oe.Backend == "etcd" {
			n++
		}
	}
	if n != len(want) {
		t.Errorf("%d of %d problems are *driver.OptionError", n, len(want))
	}
	// Negative control: the defaults, and NaN, which compares false.
	if _, err := newOptions(nil, &adapter.Problems{Backend: backend}, true); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if _, err := newOptions([]Option{WithLeaseReuse(math.NaN(), 0)}, &adapter.Problems{Backend: backend}, true); err == nil {
		t.Error("NaN fraction accepted")
	}
	// One problem alone is the *driver.OptionError itself.
	if _, err := newOptions([]Option{WithMaxKeysPerLease(0)}, &adapter.Problems{Backend: backend}, true); err == nil || reflect.TypeOf(err) != reflect.TypeFor[*driver.OptionError]() {
		t.Errorf("one problem: %T %v, want a *driver.OptionError", err, err)
	}
}
