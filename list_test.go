package kvbreaker_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
)

// listed pages through b.List, limit at a time, and returns the circuits by
// host; a host listed twice fails t.
func listed(t *testing.T, b *kvbreaker.Breaker, limit int) map[string]kvbreaker.Status {
	t.Helper()
	got := map[string]kvbreaker.Status{}
	cursor := ""
	for range 1000 {
		page, next, err := b.List(t.Context(), cursor, limit)
		if err != nil {
			t.Fatalf("List(%q, %d): %v", cursor, limit, err)
		}
		if len(page) > limit {
			t.Fatalf("List(%q, %d): %d circuits", cursor, limit, len(page))
		}
		for _, st := range page {
			if _, dup := got[st.Host]; dup {
				t.Fatalf("%q listed twice", st.Host)
			}
			got[st.Host] = st
		}
		if next == "" {
			return got
		}
		cursor = next
	}
	t.Fatal("List never reached its last page")
	return nil
}

func TestListCircuits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		store := memory.New()
		b := newBreaker(t, store, kvbreaker.Settings{FailureThreshold: 2, RecoveryDelay: time.Minute})
		fail := func(host string, n int) {
			for range n {
				if err := b.Failure(ctx, host); err != nil {
					t.Fatal(err)
				}
			}
		}
		fail("half.example", 2)
		time.Sleep(time.Minute)
		if v, err := b.Allow(ctx, "half.example", time.Time{}); err != nil || v.Decision != kvbreaker.Probe {
			t.Fatalf("Allow after RecoveryDelay: %v, %v", v.Decision, err)
		}
		opened := time.Now()
		fail("open.example", 2)
		fail("failing.example", 1)
		fail("recovered.example", 1)
		if err := b.Success(ctx, "recovered.example"); err != nil {
			t.Fatal(err)
		}
		// Another fleet's key in the same store is not this Breaker's host.
		other, err := kvbreaker.Prefixed(store, "fleet-b/")
		if err != nil {
			t.Fatal(err)
		}
		fb := newBreaker(t, other, kvbreaker.Settings{FailureThreshold: 2})
		if err := fb.Failure(ctx, "b.example"); err != nil {
			t.Fatal(err)
		}

		want := map[string]kvbreaker.State{
			"half.example":    kvbreaker.StateHalfOpen,
			"open.example":    kvbreaker.StateOpen,
			"failing.example": kvbreaker.StateClosed,
		}
		for _, limit := range []int{1, 2, kvbreaker.MaxListLimit} {
			got := listed(t, b, limit)
			if !maps.EqualFunc(got, want, func(st kvbreaker.Status, s kvbreaker.State) bool { return st.State == s }) {
				t.Fatalf("limit %d: listed %v, want %v", limit, got, want)
			}
			if st := got["open.example"]; !st.RestrainedUntil.Equal(opened.Add(time.Minute)) || len(st.Failures) != 2 || st.Probing {
				t.Errorf("open.example: %+v, want restrained until %v with 2 failures", st, opened.Add(time.Minute))
			}
			if st := got["half.example"]; !st.Probing {
				t.Errorf("half.example: %+v, want a probe in flight", st)
			}
			if st := got["failing.example"]; len(st.Failures) != 1 || !st.RestrainedUntil.IsZero() {
				t.Errorf("failing.example: %+v, want 1 failure and no restraint", st)
			}
		}
		// The other fleet lists its own host, not this fleet's.
		if got := slices.Sorted(maps.Keys(listed(t, fb, 10))); !slices.Equal(got, []string{"b.example"}) {
			t.Errorf("fleet-b lists %q", got)
		}

		var hosts []string
		for st, err := range b.Circuits(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			hosts = append(hosts, st.Host)
		}
		slices.Sort(hosts)
		if want := slices.Sorted(maps.Keys(want)); !slices.Equal(hosts, want) {
			t.Errorf("Circuits: %q, want %q", hosts, want)
		}
	})
}

// noList is a store without driver.Lister.
type noList struct{ driver.Store }

func TestListNoLister(t *testing.T) {
	b := newBreaker(t, noList{memory.New()}, kvbreaker.Settings{})
	prefixed, err := kvbreaker.Prefixed(noList{memory.New()}, "fleet/")
	if err != nil {
		t.Fatal(err)
	}
	pb := newBreaker(t, prefixed, kvbreaker.Settings{})
	for name, b := range map[string]*kvbreaker.Breaker{"plain": b, "prefixed": pb} {
		_, _, err := b.List(t.Context(), "", 10)
		if !errors.Is(err, kvbreaker.ErrNoLister) || !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s: List: %v, want ErrNoLister", name, err)
		}
		n := 0
		for st, err := range b.Circuits(t.Context()) {
			n++
			if !errors.Is(err, kvbreaker.ErrNoLister) || st.Host != "" {
				t.Errorf("%s: Circuits yielded %+v, %v; want ErrNoLister", name, st, err)
			}
		}
		if n != 1 {
			t.Errorf("%s: Circuits yielded %d times, want once", name, n)
		}
	}
}

func TestListLimit(t *testing.T) {
	b := newBreaker(t, memory.New(), kvbreaker.Settings{})
	for _, limit := range []int{0, -1, kvbreaker.MaxListLimit + 1} {
		if _, _, err := b.List(t.Context(), "", limit); err == nil {
			t.Errorf("List with limit %d: no error", limit)
		}
	}
}

// failGet is a store whose Get of one key fails.
type failGet struct {
	*memory.Store
	key string
}

var errRead = errors.New("read refused")

func (s failGet) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	if key == s.key {
		return nil, driver.NoVersion, errRead
	}
	return s.Store.Get(ctx, key)
}

func TestListUnreadable(t *testing.T) {
	ctx := t.Context()
	mem := memory.New()
	b := newBreaker(t, failGet{mem, "bad.example"}, kvbreaker.Settings{})
	for i := range 5 {
		if err := b.Failure(ctx, fmt.Sprintf("h%d.example", i)); err != nil {
			t.Fatal(err)
		}
	}
	// Written past failGet, which would refuse to read it first.
	w := newBreaker(t, mem, kvbreaker.Settings{})
	if err := w.Failure(ctx, "bad.example"); err != nil {
		t.Fatal(err)
	}
	page, next, err := b.List(ctx, "", 100)
	var ue *kvbreaker.UnreadableError
	if !errors.As(err, &ue) || ue.Host != "bad.example" || !errors.Is(err, errRead) || next != "" {
		t.Fatalf("List: err %v, next %q; want an UnreadableError for bad.example", err, next)
	}
	if len(page) != 5 {
		t.Errorf("List: %d circuits beside the unreadable one, want 5", len(page))
	}
	var hosts []string
	unreadable := 0
	for st, err := range b.Circuits(ctx) {
		switch {
		case errors.Is(err, errRead) && st.Host == "bad.example":
			unreadable++
		case err != nil:
			t.Fatalf("Circuits: %+v, %v", st, err)
		default:
			hosts = append(hosts, st.Host)
		}
	}
	if unreadable != 1 || len(hosts) != 5 {
		t.Errorf("Circuits: %d unreadable, hosts %q; want 1 and the 5 others", unreadable, hosts)
	}

	// Breaking out of the loop ends the iteration.
	n := 0
	for range b.Circuits(ctx) {
		n++
		break
	}
	if n != 1 {
		t.Errorf("the loop ran %d times after break", n)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := b.List(cctx, "", 100); !errors.Is(err, context.Canceled) {
		t.Errorf("List with a cancelled context: %v", err)
	}
}

// repeatList lists the last key of the previous page again, as Redis's SCAN
// may; memory's cursor is that key.
type repeatList struct{ *memory.Store }

func (s repeatList) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	keys, next, err := s.Store.List(ctx, prefix, cursor, limit)
	if cursor != "" {
		keys = append([]string{cursor}, keys...)
	}
	return keys, next, err
}

func TestCircuitsRepeats(t *testing.T) {
	ctx := t.Context()
	b := newBreaker(t, repeatList{memory.New()}, kvbreaker.Settings{})
	const n = 250 // three of Circuits' pages
	for i := range n {
		if err := b.Failure(ctx, fmt.Sprintf("h%03d.example", i)); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	for st, err := range b.Circuits(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		seen[st.Host]++
	}
	if len(seen) != n {
		t.Errorf("Circuits yielded %d hosts, want %d", len(seen), n)
	}
	for h, c := range seen {
		if c != 1 {
			t.Errorf("%s yielded %d times", h, c)
		}
	}
}
