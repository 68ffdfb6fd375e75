package postgres_test

import (
	"errors"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestForeignVersion: a foreign row's version names its content: it
// changes when the content does, a compare-and-swap or -delete with an
// older one conflicts (reporting the current one) and changes nothing, and
// one with the current one replaces the row, with the write's TTL.
func TestForeignVersion(t *testing.T) {
	ctx := t.Context()
	st := newRaw(t)
	pool := st.Pool()
	key := uniquePrefix(t) + "v0"
	if err := plantForeign(ctx, pool, key, "version 0"); err != nil {
		t.Fatal(err)
	}
	v, v1, err := st.Get(ctx, key)
	if err != nil || string(v) != "\x00garbage" || v1 < 1<<63 {
		t.Fatalf("Get of a row with version 0 = %q, %d, %v; want its value with a version of at least 2^63", v, v1, err)
	}
	if _, again, _ := st.Get(ctx, key); again != v1 {
		t.Fatalf("Get of the same row again = version %d, first %d", again, v1)
	}
	if _, err := pool.Exec(ctx, `UPDATE `+table+` SET value = 'changed' WHERE key = $1`, key); err != nil {
		t.Fatal(err)
	}
	_, v2, err := st.Get(ctx, key)
	if err != nil || v2 == v1 || v2 < 1<<63 {
		t.Fatalf("Get after the row changed = version %d, %v; want a foreign version other than %d", v2, err, v1)
	}
	_, err = st.CompareAndSwap(ctx, key, v1, []byte("x"), time.Minute)
	if ce, ok := errors.AsType[*driver.ConflictError](err); !ok || ce.Version != v2 || string(ce.Value) != "changed" {
		t.Fatalf("CompareAndSwap with the row's old version = %v; want a conflict naming %d", err, v2)
	}
	if err := st.CompareAndDelete(ctx, key, v1); !errors.Is(err, driver.ErrConflict) {
		t.Fatalf("CompareAndDelete with the row's old version = %v; want a conflict", err)
	}
	_, err = st.CompareAndSwap(ctx, key, driver.NoVersion, []byte("x"), time.Minute)
	if ce, ok := errors.AsType[*driver.ConflictError](err); !ok || ce.Version != v2 {
		t.Fatalf("create over the row = %v; want a conflict naming %d", err, v2)
	}
	if d, err := st.Expiry(ctx, key); err != nil || d != driver.NoExpiry {
		t.Fatalf("Expiry of the row after the conflicting writes = %v, %v; want driver.NoExpiry", d, err)
	}
	nv, err := st.CompareAndSwap(ctx, key, v2, []byte("x"), time.Minute)
	if err != nil || nv >= 1<<63 {
		t.Fatalf("CompareAndSwap with the row's version = %d, %v; want a record's version", nv, err)
	}
	if got, ver, err := st.Get(ctx, key); err != nil || string(got) != "x" || ver != nv {
		t.Fatalf("Get after the replacing write = %q, %d, %v; want \"x\", %d", got, ver, err, nv)
	}
	if d, err := st.Expiry(ctx, key); err != nil || d <= 0 || d > time.Minute {
		t.Fatalf("Expiry after the replacing write = %v, %v; want the write's minute", d, err)
	}
	// A record's version never names a foreign row: the row's version is
	// not compared as a number.
	if err := plantForeign(ctx, pool, key, "negative version"); err != nil {
		t.Fatal(err)
	}
	neg := driver.Version(1<<64 - 5) // -5 as a bigint
	if _, err := st.CompareAndSwap(ctx, key, neg, []byte("x"), time.Minute); !errors.Is(err, driver.ErrConflict) {
		t.Fatalf("CompareAndSwap naming version -5 of a foreign row = %v; want a conflict", err)
	}
}

// TestForeignLostAnswer: a write over a foreign row whose answer is lost
// (the store sends it again) recognises its own write.
func TestForeignLostAnswer(t *testing.T) {
	ctx := t.Context()
	p, err := faultproxy.Start(server.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	st := mustNew(t, server.URLFor(p.Addr()))
	pool := newRaw(t).Pool()
	prefix := uniquePrefix(t)
	for _, shape := range []string{"version 0", "two-dimensional writes"} {
		key := prefix + shape
		if err := plantForeign(ctx, pool, key, shape); err != nil {
			t.Fatal(err)
		}
		ver := mustGet(t, st, key)
		if err := p.DropNextAnswer(ctx); err != nil {
			t.Fatal(err)
		}
		nv, err := st.CompareAndSwap(ctx, key, ver, []byte("mine"), time.Minute)
		if err != nil {
			t.Fatalf("%s: CompareAndSwap whose answer was lost = %v", shape, err)
		}
		if got := mustGet(t, st, key); got != nv {
			t.Fatalf("%s: CompareAndSwap returned %d, Get says %d", shape, nv, got)
		}
		if err := plantForeign(ctx, pool, key, shape); err != nil {
			t.Fatal(err)
		}
		ver = mustGet(t, st, key)
		if err := p.DropNextAnswer(ctx); err != nil {
			t.Fatal(err)
		}
		if err := st.CompareAndDelete(ctx, key, ver); err != nil {
			t.Fatalf("%s: CompareAndDelete whose answer was lost = %v", shape, err)
		}
	}
	if s := p.Stats(); s.Dropped != 4 {
		t.Fatalf("the proxy dropped %d answers, want 4: %+v", s.Dropped, s)
	}
}

// TestExpiry: Expiry is the time to the row's expires_at, driver.NoExpiry
// for 'infinity', and not found for an absent key, an expired row or a
// tombstone, also through kvbreaker.Prefixed.
func TestExpiry(t *testing.T) {
	ctx := t.Context()
	raw := newRaw(t)
	prefix := uniquePrefix(t)
	p := isolate(t, raw, prefix)
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
			if _, err := p.CompareAndSwap(ctx, "short-"+name, driver.NoVersion, []byte("r"), time.Microsecond); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				_, err := r.Expiry(ctx, at("short-"+name))
				if errors.Is(err, driver.ErrNotFound) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("Expiry of a row written with a TTL of 1 µs = %v, 5 s later; want not found", err)
				}
				time.Sleep(10 * time.Millisecond) // the server's expiry, in real time
			}
			for _, shape := range []string{"version 0", "valid version, no expiry"} {
				if err := plantForeign(ctx, raw.Pool(), prefix+"foreign", shape); err != nil {
					t.Fatal(err)
				}
				if d, err := r.Expiry(ctx, at("foreign")); err != nil || d != driver.NoExpiry {
					t.Errorf("Expiry of a row %s with expires_at 'infinity' = %v, %v; want driver.NoExpiry", shape, d, err)
				}
			}
			if err := plantForeign(ctx, raw.Pool(), prefix+"foreign", "version 0, expiring"); err != nil {
				t.Fatal(err)
			}
			if d, err := r.Expiry(ctx, at("foreign")); err != nil || d <= 59*time.Minute || d > time.Hour {
				t.Errorf("Expiry of a row expiring in an hour = %v, %v", d, err)
			}
		})
	}
}
