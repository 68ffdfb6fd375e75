package redis_test

import (
	"errors"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestForeignVersion: a foreign key's version names its content: it
// changes when the content does, a compare-and-swap or -delete with an
// older one conflicts (reporting the current one), and one with the current
// one replaces the key, with the write's TTL, or leaves a tombstone that
// expires.
func TestForeignVersion(t *testing.T) {
	ctx := t.Context()
	c := newClient(t, srv.Addr())
	st := newRaw(t, srv.Addr())
	key := uniquePrefix(t) + "list"
	if err := c.RPush(ctx, key, "a").Err(); err != nil {
		t.Fatal(err)
	}
	v, v1, err := st.Get(ctx, key)
	if err != nil || len(v) != 0 || v1 < 1<<63 {
		t.Fatalf("Get of a list = %q, %d, %v; want an empty value with a version of at least 2^63", v, v1, err)
	}
	if _, again, _ := st.Get(ctx, key); again != v1 {
		t.Fatalf("Get of the same list again = version %d, first %d", again, v1)
	}
	if err := c.RPush(ctx, key, "b").Err(); err != nil {
		t.Fatal(err)
	}
	_, v2, err := st.Get(ctx, key)
	if err != nil || v2 == v1 {
		t.Fatalf("Get after the list changed = version %d, %v; want a version other than %d", v2, err, v1)
	}
	_, err = st.CompareAndSwap(ctx, key, v1, []byte("x"), time.Minute)
	if ce, ok := errors.AsType[*driver.ConflictError](err); !ok || ce.Version != v2 {
		t.Fatalf("CompareAndSwap with the list's old version = %v; want a conflict naming %d", err, v2)
	}
	if err := st.CompareAndDelete(ctx, key, v1); !errors.Is(err, driver.ErrConflict) {
		t.Fatalf("CompareAndDelete with the list's old version = %v; want a conflict", err)
	}
	if _, err := st.CompareAndSwap(ctx, key, driver.NoVersion, []byte("x"), time.Minute); !errors.Is(err, driver.ErrConflict) {
		t.Fatalf("create over a list = %v; want a conflict", err)
	}
	if n, _ := c.LLen(ctx, key).Result(); n != 2 {
		t.Fatalf("the list has %d elements after the conflicting writes, want 2", n)
	}
	nv, err := st.CompareAndSwap(ctx, key, v2, []byte("x"), time.Minute)
	if err != nil {
		t.Fatalf("CompareAndSwap with the list's version = %v", err)
	}
	if got, ver, err := st.Get(ctx, key); err != nil || string(got) != "x" || ver != nv {
		t.Fatalf("Get after the replacing write = %q, %d, %v; want \"x\", %d", got, ver, err, nv)
	}
	if d, err := c.PTTL(ctx, key).Result(); err != nil || d <= 0 || d > time.Minute {
		t.Fatalf("PTTL after the replacing write = %v, %v; want the write's minute", d, err)
	}

	// Deleted: a tombstone, which expires.
	tomb := uniquePrefix(t) + "string"
	if err := c.Set(ctx, tomb, "s", 0).Err(); err != nil {
		t.Fatal(err)
	}
	v, ver, err := st.Get(ctx, tomb)
	if err != nil || string(v) != "s" {
		t.Fatalf("Get of a string = %q, %d, %v; want its bytes", v, ver, err)
	}
	if err := st.CompareAndDelete(ctx, tomb, ver); err != nil {
		t.Fatalf("CompareAndDelete of a string with its version = %v", err)
	}
	if _, _, err := st.Get(ctx, tomb); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("Get after the delete = %v; want not found", err)
	}
	if d, err := c.PTTL(ctx, tomb).Result(); err != nil || d <= 0 || d > redis.TombstoneTTL {
		t.Fatalf("PTTL of the tombstone = %v, %v; want at most %v", d, err, redis.TombstoneTTL)
	}
}

// TestForeignVersionBeyondDoubles: a hash whose n is beyond 2^53 is
// foreign: a script's doubles cannot add one to it, so counting on from it
// would repeat a version.
func TestForeignVersionBeyondDoubles(t *testing.T) {
	ctx := t.Context()
	c := newClient(t, srv.Addr())
	st := newRaw(t, srv.Addr())
	key := uniquePrefix(t) + "big"
	if err := c.HSet(ctx, key, redis.FieldValue, "v", redis.FieldVersion, "9007199254740993").Err(); err != nil {
		t.Fatal(err)
	}
	_, ver, err := st.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[driver.Version]bool{ver: true}
	for i := range 3 {
		if ver, err = st.CompareAndSwap(ctx, key, ver, []byte("v"), time.Minute); err != nil {
			t.Fatalf("write %d: %v", i+1, err)
		}
		if seen[ver] {
			t.Fatalf("write %d returned version %d again", i+1, ver)
		}
		seen[ver] = true
	}
}

// TestForeignLostAnswer: a write over a foreign key whose answer is lost
// (go-redis sends it again) recognises its own write.
func TestForeignLostAnswer(t *testing.T) {
	ctx := t.Context()
	p, err := faultproxy.Start(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	c := newClient(t, srv.Addr())
	st := newRaw(t, p.Addr())
	prefix := uniquePrefix(t)
	for _, shape := range []string{"string key", "hash with n=x"} {
		key := prefix + shape
		if err := plantForeign(ctx, c, key, shape); err != nil {
			t.Fatal(err)
		}
		_, ver, err := st.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.DropNextAnswer(ctx); err != nil {
			t.Fatal(err)
		}
		nv, err := st.CompareAndSwap(ctx, key, ver, []byte("mine"), time.Minute)
		if err != nil {
			t.Fatalf("%s: CompareAndSwap whose answer was lost = %v", shape, err)
		}
		if err := plantForeign(ctx, c, key, shape); err != nil {
			t.Fatal(err)
		}
		if _, ver, err = st.Get(ctx, key); err != nil {
			t.Fatal(err)
		}
		if err := p.DropNextAnswer(ctx); err != nil {
			t.Fatal(err)
		}
		if err := st.CompareAndDelete(ctx, key, ver); err != nil {
			t.Fatalf("%s: CompareAndDelete whose answer was lost = %v (the swap before returned %d)", shape, err, nv)
		}
	}
	if s := p.Stats(); s.Dropped < 4 {
		t.Fatalf("the proxy dropped %d answers, want 4: %+v", s.Dropped, s)
	}
}

// TestExpiry: Expiry is the key's PTTL, driver.NoExpiry for a key without
// TTL, and not found for an absent key or a tombstone, also through
// kvbreaker.Prefixed.
func TestExpiry(t *testing.T) {
	ctx := t.Context()
	c := newClient(t, srv.Addr())
	prefix := uniquePrefix(t)
	p := newStoreUnder(t, c, prefix)
	raw := newRaw(t, srv.Addr())
	for name, r := range map[string]driver.ExpiryReader{"raw": raw, "prefixed": p.(driver.ExpiryReader)} {
		t.Run(name, func(t *testing.T) {
			at := func(k string) string {
				if name == "raw" {
					return prefix + k
				}
				return k
			}
			if _, err := r.Expiry(ctx, at("absent")); !errors.Is(err, driver.ErrNotFound) {
				t.Errorf("Expiry of an absent key = %v; want not found", err)
			}
			ver, err := p.CompareAndSwap(ctx, "rec-"+name, driver.NoVersion, []byte("r"), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if d, err := r.Expiry(ctx, at("rec-"+name)); err != nil || d <= time.Minute-10*time.Second || d > time.Minute {
				t.Errorf("Expiry of a record written with a minute's TTL = %v, %v", d, err)
			}
			if err := p.CompareAndDelete(ctx, "rec-"+name, ver); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Expiry(ctx, at("rec-"+name)); !errors.Is(err, driver.ErrNotFound) {
				t.Errorf("Expiry of a tombstone = %v; want not found", err)
			}
			for _, shape := range []string{"string key", "hash with v and no n", "hash with garbage v and valid n"} {
				if err := plantForeign(ctx, c, prefix+"foreign", shape); err != nil {
					t.Fatal(err)
				}
				if d, err := r.Expiry(ctx, at("foreign")); err != nil || d != driver.NoExpiry {
					t.Errorf("Expiry of a %s without TTL = %v, %v; want driver.NoExpiry", shape, d, err)
				}
			}
		})
	}
}
