package conformance_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
)

// listBug is a memory store whose List is replaced: list gets every live
// key under prefix, in byte order, and returns a page.
type listBug struct {
	*memory.Store
	list func(all []string, prefix, cursor string, limit int) ([]string, string)
}

func (s listBug) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	all, err := everything(ctx, s.Store, prefix)
	if err != nil {
		return nil, "", err
	}
	page, next := s.list(all, prefix, cursor, limit)
	return page, next, nil
}

// everything lists every live key of s under prefix.
func everything(ctx context.Context, s driver.Lister, prefix string) ([]string, error) {
	var all []string
	cursor := ""
	for {
		page, next, err := s.List(ctx, prefix, cursor, 1000)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if next == "" {
			return all, nil
		}
		cursor = next
	}
}

// after pages through all after cursor (a key), as memory does.
func after(all []string, cursor string, limit int) ([]string, string) {
	i, found := slices.BinarySearch(all, cursor)
	if found {
		i++
	}
	if cursor == "" {
		i = 0
	}
	rest := all[i:]
	if len(rest) <= limit {
		return slices.Clone(rest), ""
	}
	page := slices.Clone(rest[:limit])
	return page, page[limit-1]
}

func listHarness(list func(all []string, prefix, cursor string, limit int) ([]string, string)) conformance.Harness {
	return memoryHarness(func(s *memory.Store) driver.Store { return listBug{s, list} })
}

// TestListBugs: a List that skips keys across pages, ignores its limit or the prefix's upper bound, or drops keys with odd bytes fails
// the case that covers it, naming the promise.
func TestListBugs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		list    func(all []string, prefix, cursor string, limit int) ([]string, string)
		c       conformance.CaseID
		promise conformance.PromiseID
	}{
		{"skips-first-key-of-later-pages", func(all []string, _, cursor string, limit int) ([]string, string) {
			page, next := after(all, cursor, limit)
			if cursor != "" && len(page) > 0 {
				page = page[1:]
			}
			return page, next
		}, "list-pages", "list-every-live-key"},
		{"ignores-limit", func(all []string, _, cursor string, limit int) ([]string, string) {
			return after(all, cursor, limit+1)
		}, "list-pages", "list-limit"},
		{"cursor-loops", func(all []string, _, cursor string, limit int) ([]string, string) {
			page, next := after(all, "", limit)
			return page, next
		}, "list-pages", "list-limit"},
		{"drops-non-ascii", func(all []string, _, cursor string, limit int) ([]string, string) {
			page, next := after(all, cursor, limit)
			return slices.DeleteFunc(page, func(k string) bool {
				for _, b := range []byte(k) {
					if b >= 0x80 {
						return true
					}
				}
				return false
			}), next
		}, "list-hostile-keys", "list-every-live-key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep, err := measure(t, listHarness(tc.list), conformance.WithSkipSlow(true))
			wantBroken(t, rep, err, tc.c, tc.promise)
		})
	}
}

// unbounded lists every key at or after prefix (no upper bound: keys
// outside it come too), or, with top, the keys up to prefix+U+10FFFF (an
// upper bound that misses keys with more after that code point).
type unbounded struct {
	*memory.Store
	top bool
}

func (s unbounded) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	all, err := everything(ctx, s.Store, "")
	if err != nil {
		return nil, "", err
	}
	var in []string
	for _, k := range all {
		if k < prefix {
			continue
		}
		if s.top && prefix != "" && k > prefix+"\U0010FFFF" {
			continue
		}
		in = append(in, k)
	}
	page, next := after(in, cursor, limit)
	return page, next, nil
}

func TestListPrefixBounds(t *testing.T) {
	t.Parallel()
	t.Run("no-upper-bound", func(t *testing.T) {
		t.Parallel()
		rep, err := measure(t, memoryHarness(func(s *memory.Store) driver.Store { return unbounded{s, false} }), conformance.WithSkipSlow(true), only("list-pages"))
		wantBroken(t, rep, err, "list-pages", "list-only-live-under-prefix")
	})
	t.Run("largest-code-point-bound", func(t *testing.T) {
		t.Parallel()
		rep, err := measure(t, memoryHarness(func(s *memory.Store) driver.Store { return unbounded{s, true} }), conformance.WithSkipSlow(true), only("list-hostile-keys"))
		wantBroken(t, rep, err, "list-hostile-keys", "list-every-live-key")
	})
}

// undead lists every key ever written and not deleted, expired or not (a
// store listing what the backend still holds).
type undead struct {
	*memory.Store
	mu   sync.Mutex
	keys map[string]bool
}

func (s *undead) CompareAndSwap(ctx context.Context, key string, old driver.Version, v []byte, ttl time.Duration) (driver.Version, error) {
	ver, err := s.Store.CompareAndSwap(ctx, key, old, v, ttl)
	if err == nil {
		s.mu.Lock()
		s.keys[key] = true
		s.mu.Unlock()
	}
	return ver, err
}

func (s *undead) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	err := s.Store.CompareAndDelete(ctx, key, old)
	if err == nil {
		s.mu.Lock()
		delete(s.keys, key)
		s.mu.Unlock()
	}
	return err
}

func (s *undead) List(_ context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	s.mu.Lock()
	var all []string
	for k := range s.keys {
		if strings.HasPrefix(k, prefix) {
			all = append(all, k)
		}
	}
	s.mu.Unlock()
	slices.Sort(all)
	page, next := after(all, cursor, limit)
	return page, next, nil
}

func TestListExpiredListed(t *testing.T) {
	t.Parallel()
	wrap := func(s *memory.Store) driver.Store { return &undead{Store: s, keys: map[string]bool{}} }
	for _, mode := range []string{"advancing", "real-time"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			var h conformance.Harness = advancingHarness(wrap)
			if mode == "real-time" {
				h = memoryHarness(wrap)
			}
			rep, err := measure(t, h, only("list-expired"))
			wantBroken(t, rep, err, "list-expired", "list-not-expired")
		})
	}
}

// notLister is a store without List: the Lister cases do not apply, and
// say so.
type notLister struct{ driver.Store }

func TestListNotApplicable(t *testing.T) {
	t.Parallel()
	rep, err := measure(t, memoryHarness(func(s *memory.Store) driver.Store { return notLister{s} }), conformance.WithSkipSlow(true))
	if err != nil {
		t.Fatalf("%v\n%s", err, rep)
	}
	seen := 0
	for _, r := range rep.Results {
		switch r.Case {
		case "list-pages", "list-hostile-keys", "list-expired":
			seen++
			if !r.NotPromised || !strings.Contains(r.Skipped, "not applicable") {
				t.Errorf("%s: not promised %v, skipped %q; want it not promised, as not applicable", r.Case, r.NotPromised, r.Skipped)
			}
		}
	}
	if seen != 3 {
		t.Errorf("%d list cases in the report, want 3", seen)
	}
}

// TestListDuplicatesNoted: a key listed twice is noted, not a violation
// (driver.Lister does not promise each key once; Redis's SCAN repeats keys).
func TestListDuplicatesNoted(t *testing.T) {
	t.Parallel()
	rep, err := measure(t, listHarness(func(all []string, _, cursor string, limit int) ([]string, string) {
		if cursor == "" || limit < 2 {
			return after(all, cursor, limit)
		}
		// The previous page's last key again, then limit-1 new ones.
		page, next := after(all, cursor, limit-1)
		return append([]string{cursor}, page...), next
	}), conformance.WithSkipSlow(true))
	if err != nil {
		t.Fatalf("%v\n%s", err, rep)
	}
	if !strings.Contains(rep.String(), "more than once") {
		t.Errorf("the report does not note the duplicates:\n%s", rep)
	}
}
