package memory_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

// manualClock is a clock the test moves by hand.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestListPages pages through live keys under a prefix, in byte order; an
// entry whose TTL has passed is not listed though the store still holds it.
func TestListPages(t *testing.T) {
	clk := &manualClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	s := memory.New(memory.WithClock(clk.Now))
	ctx := t.Context()
	put := func(key string, ttl time.Duration) {
		if _, err := s.CompareAndSwap(ctx, key, driver.NoVersion, []byte("v"), ttl); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for i := range 7 {
		k := fmt.Sprintf("fleet-a/h%d.example", i)
		put(k, time.Hour)
		want = append(want, k)
	}
	put("fleet-a/expired.example", time.Minute)
	put("fleet-b/other.example", time.Hour)
	put("fleet-a", time.Hour) // shorter than the prefix: not under it
	clk.Advance(time.Minute)

	// Negative control: the expired entry is still held; only List's
	// filter keeps it out.
	if n := s.Len(); n != 10 {
		t.Fatalf("store holds %d entries, want 10 (the expired one included)", n)
	}
	for _, limit := range []int{1, 2, 3, 7, 8, 100} {
		got, pages := backendtest.ListAll(t, s, "fleet-a/", limit, backendtest.InOrder(nil))
		if !slices.Equal(got, want) {
			t.Errorf("limit %d: listed %q, want %q", limit, got, want)
		}
		if wantPages := max(1, (len(want)+limit-1)/limit); pages != wantPages {
			t.Errorf("limit %d: %d pages, want %d", limit, pages, wantPages)
		}
	}
	all, _ := backendtest.ListAll(t, s, "", 4, backendtest.InOrder(nil))
	if len(all) != 9 || slices.Contains(all, "fleet-a/expired.example") {
		t.Errorf("whole store listed %q: want the 9 live keys", all)
	}
	// A cursor between keys resumes after it.
	page, next, err := s.List(ctx, "fleet-a/", "fleet-a/h3", 2)
	if err != nil || !slices.Equal(page, []string{"fleet-a/h3.example", "fleet-a/h4.example"}) || next != "fleet-a/h4.example" {
		t.Errorf("List after fleet-a/h3 = %q, %q, %v", page, next, err)
	}
	if page, next, err := s.List(ctx, "nobody/", "", 5); err != nil || len(page) != 0 || next != "" {
		t.Errorf("List of an empty prefix = %q, %q, %v; want nothing", page, next, err)
	}
}

// TestListOpenAndClosedHosts: what `kvbreaker list` asks of a store behind
// kvbreaker.Prefixed: the hosts with a record (open, or closed with a
// failure counted), not a host whose record expired.
func TestListOpenAndClosedHosts(t *testing.T) {
	clk := &manualClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	mem := memory.New(memory.WithClock(clk.Now))
	store, err := kvbreaker.Prefixed(mem, "fleet-a/")
	if err != nil {
		t.Fatal(err)
	}
	b, err := kvbreaker.New(store, kvbreaker.Settings{
		FailureThreshold: 2, FailureWindow: time.Minute, RecoveryDelay: time.Minute, Clock: clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	fail := func(host string, n int) {
		for range n {
			if err := b.Failure(ctx, host); err != nil {
				t.Fatal(err)
			}
		}
	}
	fail("gone.example", 1)   // closed, one failure
	clk.Advance(b.StateTTL()) // its record's TTL ends
	fail("open-1.example", 2)
	fail("open-2.example", 2)
	fail("closed.example", 1)
	if _, err := mem.CompareAndSwap(ctx, "fleet-b/open.example", driver.NoVersion, []byte("x"), time.Hour); err != nil {
		t.Fatal(err)
	}
	got, _ := backendtest.ListAll(t, store.(driver.Lister), "", 2, backendtest.InOrder(nil))
	want := []string{"closed.example", "open-1.example", "open-2.example"}
	if !slices.Equal(got, want) {
		t.Fatalf("listed %q, want %q", got, want)
	}
	for _, host := range got {
		st, err := b.Inspect(ctx, host)
		if err != nil {
			t.Fatal(err)
		}
		want := kvbreaker.StateOpen
		if host == "closed.example" {
			want = kvbreaker.StateClosed
		}
		if st.State != want {
			t.Errorf("%s is %v, want %v", host, st.State, want)
		}
	}
}

// TestListBoundedAndErrors: a page never holds more than limit keys; a
// limit below 1 and an ended context are *driver.OpError.
func TestListBoundedAndErrors(t *testing.T) {
	s := memory.New()
	ctx := t.Context()
	for i := range 1000 {
		if _, err := s.CompareAndSwap(ctx, fmt.Sprintf("h%04d", i), driver.NoVersion, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	page, next, err := s.List(ctx, "", "", 10)
	if err != nil || len(page) != 10 || page[0] != "h0000" || next != "h0009" {
		t.Fatalf("first page %q, %q, %v", page, next, err)
	}
	for _, limit := range []int{0, -1} {
		_, _, err := s.List(ctx, "h", "", limit)
		oe, ok := errors.AsType[*driver.OpError](err)
		if !ok || oe.Op != "list" || !strings.Contains(err.Error(), "is not positive") {
			t.Errorf("List with limit %d: %v, want an *driver.OpError about the limit", limit, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := s.List(cctx, "", "", 10); !errors.Is(err, context.Canceled) {
		t.Errorf("List with an ended context: %v", err)
	}
}

// TestListWhileWriting lists while other goroutines write (run with -race):
// every key written before the listing began and never deleted is listed.
func TestListWhileWriting(t *testing.T) {
	s := memory.New()
	ctx := t.Context()
	for i := range 200 {
		if _, err := s.CompareAndSwap(ctx, fmt.Sprintf("old-%03d", i), driver.NoVersion, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.CompareAndSwap(ctx, fmt.Sprintf("new-%d-%d", w, i), driver.NoVersion, nil, time.Hour); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	got, _ := backendtest.ListAll(t, s, "old-", 7, backendtest.InOrder(nil))
	close(stop)
	wg.Wait()
	if len(got) != 200 {
		t.Errorf("listed %d of the 200 keys", len(got))
	}
}

// TestErrorShape: ErrNotFound and conflicts come bare; any other error is
// a *driver.OpError reading "memory: <op> <key>: <cause>", the shape every
// adapter's errors take (driver's package doc), with the operation named
// as driver names it ("compare-and-swap", not "put").
func TestErrorShape(t *testing.T) {
	s := memory.New()
	ctx := t.Context()
	if _, _, err := s.Get(ctx, "h"); err != driver.ErrNotFound {
		t.Errorf("Get of an absent key: %v, want driver.ErrNotFound itself", err)
	}
	if _, err := s.CompareAndSwap(ctx, "h", driver.NoVersion, []byte("v"), time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err := s.CompareAndSwap(ctx, "h", driver.NoVersion, []byte("w"), time.Minute)
	if _, ok := err.(*driver.ConflictError); !ok {
		t.Errorf("conflict: %T %v, want a bare *driver.ConflictError", err, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	for _, tc := range []struct {
		op, msg string
		call    func() error
	}{
		{"get", "memory: get h: context canceled", func() error { _, _, err := s.Get(cctx, "h"); return err }},
		{"compare-and-swap", "memory: compare-and-swap h: context canceled", func() error {
			_, err := s.CompareAndSwap(cctx, "h", 1, nil, time.Minute)
			return err
		}},
		{"compare-and-swap", "memory: compare-and-swap h: ttl 0s is not positive", func() error {
			_, err := s.CompareAndSwap(ctx, "h", 1, nil, 0)
			return err
		}},
		{"compare-and-delete", "memory: compare-and-delete h: context canceled", func() error { return s.CompareAndDelete(cctx, "h", 1) }},
		{"list", "memory: list h: context canceled", func() error { _, _, err := s.List(cctx, "h", "", 1); return err }},
	} {
		err := tc.call()
		oe, ok := err.(*driver.OpError)
		if !ok || oe.Backend != "memory" || oe.Op != tc.op {
			t.Errorf("%s: %T %v, want a *driver.OpError for %s", tc.op, err, err, tc.op)
			continue
		}
		if err.Error() != tc.msg {
			t.Errorf("%s: %q, want %q", tc.op, err, tc.msg)
		}
	}
}

// BenchmarkList is one page of 100 keys from a store of 100,000:
//
//	go test -run '^$' -bench BenchmarkList -benchmem ./backends/memory/
func BenchmarkList(b *testing.B) {
	s := memory.New()
	ctx := b.Context()
	for i := range 100_000 {
		if _, err := s.CompareAndSwap(ctx, fmt.Sprintf("h%06d.example", i), driver.NoVersion, nil, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	cursor := "h050000.example"
	for b.Loop() {
		if _, _, err := s.List(ctx, "", cursor, 100); err != nil {
			b.Fatal(err)
		}
	}
}
