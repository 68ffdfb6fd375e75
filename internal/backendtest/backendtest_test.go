package backendtest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/internal/tbtest"
)

// failure runs f and returns the first failure it reported.
func failure(t *testing.T, f func(testing.TB)) string { return tbtest.FirstFailure(t, f) }

// pages is a Lister that answers fixed pages, whatever it is asked.
type pages struct {
	pages [][]string
	next  []string
}

func (p *pages) List(_ context.Context, _, cursor string, _ int) ([]string, string, error) {
	i := 0
	if cursor != "" {
		i = slices.Index(p.next, cursor) + 1
	}
	return p.pages[i], p.next[i], nil
}

func TestListAll(t *testing.T) {
	ctx := t.Context()
	s := memory.New()
	var want []string
	for i := range 7 {
		k := fmt.Sprintf("h%d.example", i)
		want = append(want, k)
		if _, err := s.CompareAndSwap(ctx, k, driver.NoVersion, nil, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	// Control: the checks pass a store that keeps every promise.
	if msg := failure(t, func(tb testing.TB) {
		keys, n := backendtest.ListAll(tb, s, "", 3, backendtest.InOrder(nil))
		if !slices.Equal(keys, want) || n != 3 {
			tb.Errorf("listed %q in %d pages", keys, n)
		}
	}); msg != "" {
		t.Fatalf("memory's List failed the checks: %s", msg)
	}
	for _, tc := range []struct {
		name string
		l    driver.Lister
		opts []backendtest.ListOption
		want string
	}{
		{"over the limit", &pages{[][]string{{"a", "b", "c", "d"}}, []string{""}}, nil, "returned 4 keys"},
		{"cursor repeats", &pages{[][]string{{"a"}, {"b"}}, []string{"a", "a"}}, nil, "has not ended"},
		{"out of order in a page", &pages{[][]string{{"b", "a"}}, []string{""}}, []backendtest.ListOption{backendtest.InOrder(nil)}, "not in order"},
		{"out of order across pages", &pages{[][]string{{"b"}, {"a"}}, []string{"b", ""}}, []backendtest.ListOption{backendtest.InOrder(nil)}, "not in order"},
		{"cursor not the last key", &pages{[][]string{{"a", "b"}, {"c"}}, []string{"a", ""}}, []backendtest.ListOption{backendtest.InOrder(nil)}, "want the page's last key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := failure(t, func(tb testing.TB) { backendtest.ListAll(tb, tc.l, "", 3, tc.opts...) })
			if !strings.Contains(msg, tc.want) {
				t.Errorf("failure %q, want one saying %q", msg, tc.want)
			}
		})
	}
}

func TestEndpoints(t *testing.T) {
	if _, err := net.DialTimeout("tcp", backendtest.ClosedPort(t), time.Second); !strings.Contains(fmt.Sprint(err), "refused") {
		t.Errorf("dial of ClosedPort = %v, want a refused connection", err)
	}
	addr, accepted := backendtest.SilentListener(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetReadDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(fmt.Sprint(err), "timeout") {
		t.Errorf("read from SilentListener = %d, %v; want nothing until the deadline", n, err)
	}
	for deadline := time.Now().Add(5 * time.Second); accepted() != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("accepted %d connections, want 1", accepted())
		}
		runtime.Gosched()
	}
}

// TestLiveListing: memory's List passes the check; the same store with the
// "expired" key's TTL not yet passed fails it, as one that listed an
// expired key would (the negative control).
func TestLiveListing(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	if msg := failure(t, func(tb testing.TB) {
		st := backendtest.Isolate(tb, memory.New(memory.WithClock(clock)), "live/")
		backendtest.LiveListing(tb, st, time.Millisecond, func() { now = now.Add(time.Second) })
	}); msg != "" {
		t.Fatalf("memory failed the listing check: %s", msg)
	}
	msg := failure(t, func(tb testing.TB) {
		st := backendtest.Isolate(tb, memory.New(memory.WithClock(clock)), "live/")
		backendtest.LiveListing(tb, st, time.Hour, nil)
	})
	if !strings.Contains(msg, "e.example") {
		t.Errorf("a live e.example listed: failure %q, want one naming it", msg)
	}
}
