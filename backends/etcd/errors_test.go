package etcd_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestErrorShape: ErrNotFound and conflicts come bare; every other error
// is a *driver.OpError reading "etcd: <op> <key>: <cause>", with "etcd: "
// once, so callers match one error type across backends and read no
// doubled prefix (as in "etcd: get \"…\" via http://…: etcd: store
// closed").
func TestErrorShape(t *testing.T) {
	s, err := etcd.New(newClient(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	key := uniquePrefix(t) + "h.example"

	if _, _, err := s.Get(ctx, key); err != driver.ErrNotFound {
		t.Errorf("Get of an absent key: %v, want driver.ErrNotFound itself", err)
	}
	if err := s.CompareAndDelete(ctx, key, 5); err != driver.ErrNotFound {
		t.Errorf("CompareAndDelete of an absent key: %v, want driver.ErrNotFound itself", err)
	}
	v := mustCAS(t, s, key, driver.NoVersion, "v", longTTL)
	if _, err := s.CompareAndSwap(ctx, key, driver.NoVersion, []byte("w"), longTTL); !isConflict(err, v) {
		t.Errorf("CompareAndSwap conflict: %T %v, want a bare *driver.ConflictError at %d", err, err, v)
	}
	if err := s.CompareAndDelete(ctx, key, v+1000); !isConflict(err, v) {
		t.Errorf("CompareAndDelete conflict: %T %v, want a bare *driver.ConflictError at %d", err, err, v)
	}

	check := func(what string, err error, op, want string) {
		t.Helper()
		oe, ok := err.(*driver.OpError)
		if !ok || oe.Backend != "etcd" || oe.Op != op {
			t.Errorf("%s: %T %v, want a *driver.OpError for %s", what, err, err, op)
			return
		}
		if err.Error() != want {
			t.Errorf("%s: %q, want %q", what, err, want)
		}
		if n := strings.Count(err.Error(), "etcd: "); n != 1 {
			t.Errorf("%s: %q says \"etcd: \" %d times", what, err, n)
		}
	}
	_, err = s.CompareAndSwap(ctx, key, v, []byte("v"), 0)
	check("zero ttl", err, "compare-and-swap", "etcd: compare-and-swap "+key+": ttl 0s is not positive")
	_, _, err = s.List(ctx, key, "", 0)
	check("zero limit", err, "list", "etcd: list "+key+": limit 0 is not positive: pass the most keys a page may hold")

	s.Close()
	_, _, err = s.Get(ctx, key)
	check("get after Close", err, "get", "etcd: get "+key+": store closed")
	_, err = s.CompareAndSwap(ctx, key, v, []byte("v"), time.Minute)
	check("compare-and-swap after Close", err, "compare-and-swap", "etcd: compare-and-swap "+key+": store closed")
	err = s.CompareAndDelete(ctx, key, v)
	check("compare-and-delete after Close", err, "compare-and-delete", "etcd: compare-and-delete "+key+": store closed")
	_, _, err = s.List(ctx, key, "", 10)
	check("list after Close", err, "list", "etcd: list "+key+": store closed")
	if !errors.Is(err, etcd.ErrClosed) {
		t.Errorf("%v does not match etcd.ErrClosed", err)
	}
}

// isConflict reports whether err is a bare *driver.ConflictError carrying
// version v.
func isConflict(err error, v driver.Version) bool {
	ce, ok := err.(*driver.ConflictError)
	return ok && ce.Version == v
}
