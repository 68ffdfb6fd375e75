// Package wipetest is, for the backends' tests, the negative control of the
// conformance suite's follow-wipe case: the same harness, its stores' feeds
// made blind to every change after their first Synced but a Put, must fail
// the case. A backend's wipe that passes follow-wipe is then known to be
// judged by the feed's reports, not passed for want of a check.
package wipetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/conformcheck"
)

// Harness is a conformance harness that can wipe.
type Harness interface {
	conformance.Harness
	conformance.Wiper
}

// Blind returns h with every store's Follow blind: after its first Synced
// it passes on only Puts (none of a snapshot after a Reset) and Synced, so
// a wipe said as Lost, Delete or Stale is never seen. Wipe is h's, on the
// store h made.
func Blind(h Harness) Harness {
	return &blind{h: h, inner: map[driver.Store]driver.Store{}}
}

type blind struct {
	h     Harness
	mu    sync.Mutex
	inner map[driver.Store]driver.Store // blinded store → h's
}

func (b *blind) MakeStore(ctx context.Context) (driver.Store, error) {
	s, err := b.h.MakeStore(ctx)
	if err != nil {
		return nil, err
	}
	f, ok := s.(driver.Follower)
	if !ok {
		return nil, fmt.Errorf("wipetest: the harness's store %T does not follow", s)
	}
	bs := &blindStore{Store: s, f: f}
	b.mu.Lock()
	b.inner[bs] = s
	b.mu.Unlock()
	return bs, nil
}

func (b *blind) Close() { b.h.Close() }

func (b *blind) Wipes() []string { return b.h.Wipes() }

func (b *blind) Wipe(ctx context.Context, s driver.Store, how string) error {
	b.mu.Lock()
	in, ok := b.inner[s]
	b.mu.Unlock()
	if !ok {
		return fmt.Errorf("wipetest: %T is not a store of this harness", s)
	}
	return b.h.Wipe(ctx, in, how)
}

// blindStore is a store whose feed ignores what a wipe reports.
type blindStore struct {
	driver.Store
	f driver.Follower
}

func (s *blindStore) Follow(ctx context.Context, prefix string, heartbeat time.Duration, fn func(driver.Change)) error {
	if err := adapter.FollowArgs(heartbeat, fn); err != nil {
		return err
	}
	synced, resyncing := false, false
	return s.f.Follow(ctx, prefix, heartbeat, func(c driver.Change) {
		switch {
		case !synced:
			synced = c.Kind == driver.ChangeSynced
		case c.Kind == driver.ChangeReset:
			resyncing = true
			return
		case c.Kind == driver.ChangeSynced:
			resyncing = false
		case c.Kind != driver.ChangePut || resyncing:
			return
		}
		fn(c)
	})
}

// CheckBlindFails runs only follow-wipe over Blind(h) and fails the test
// unless the case reports its promise broken. It closes h at the test's
// end.
func CheckBlindFails(t *testing.T, h Harness) {
	t.Helper()
	t.Cleanup(h.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	rep, err := conformcheck.Measure(ctx, Blind(h), func(o *conformcheck.Options) {
		o.Only = []string{"follow-wipe"}
		o.SkipSlow = true
	})
	if rep == nil {
		t.Fatalf("Measure returned no report: %v", err)
	}
	if !errors.Is(err, conformance.PromiseID("follow-wipe")) {
		t.Fatalf("a feed blind to wipes passed follow-wipe (err %v):\n%s", err, rep)
	}
	for _, r := range rep.Results {
		if r.Case == "follow-wipe" {
			for _, p := range r.Problems {
				t.Logf("blind feed, as wanted: %s", firstLine(p.Error()))
			}
		}
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
