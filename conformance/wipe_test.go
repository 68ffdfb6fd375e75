package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
)

// blindToWipes is a follower that never reports what a wipe changed: no
// Delete, no Put, no Lost, and its expiry scan passes over the wiped keys,
// as a polling or notification feed does that the store's bulk operations
// bypass.
const blindToWipes feedBug = 100

// wipes are the ways a wipingHarness changes keys behind the hub's writes:
// every key deleted and reported as Deletes; every key replaced and reported
// as Puts; every key deleted and the feeds cut, reported as Lost and a new
// snapshot.
var wipes = []string{"delete-all", "restore", "flush"}

// wipingHarness is a breakingHarness whose hubs can be wiped, each way of
// ways (nil: every way).
type wipingHarness struct {
	breakingHarness
	ways []string
}

func (h wipingHarness) Wipes() []string {
	if h.ways != nil {
		return h.ways
	}
	return wipes
}

func (h wipingHarness) Wipe(ctx context.Context, s driver.Store, how string) error {
	hub, ok := s.(*followHub)
	if !ok {
		return fmt.Errorf("wipe: %T is not a store of this harness", s)
	}
	return hub.wipe(ctx, how)
}

// wipe changes every key of the hub's store the way how says, reporting it
// to the followers as a correct feed would, unless the hub's bug is
// blindToWipes.
func (h *followHub) wipe(ctx context.Context, how string) error {
	if !slices.Contains(wipes, how) {
		return fmt.Errorf("wipe: no way %q", how)
	}
	keys, err := everything(ctx, h.Store, "")
	if err != nil {
		return err
	}
	if how == "flush" && h.bug != blindToWipes {
		h.breakFeeds() // reconnects with Lost and a snapshot after downFor
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range keys {
		_, ver, err := h.Store.Get(ctx, k)
		if errors.Is(err, driver.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		c := driver.Change{Kind: driver.ChangeDelete, Key: k, Version: ver}
		if how == "restore" {
			v := []byte("restored " + k)
			nv, err := h.Store.CompareAndSwap(ctx, k, ver, v, 10*time.Minute)
			if err != nil {
				return err
			}
			c = driver.Change{Kind: driver.ChangePut, Key: k, Value: v, Version: nv}
		} else if err := h.Store.CompareAndDelete(ctx, k, ver); err != nil {
			return err
		}
		if h.bug == blindToWipes {
			if h.wiped == nil {
				h.wiped = map[string]bool{}
			}
			h.wiped[k] = true
			continue
		}
		h.publish(c)
	}
	return nil
}

// TestFollowWipe: a follower that reports a wipe as deletes, as new values or
// as Lost and a resynchronisation passes follow-wipe, each way verified; one
// blind to wipes fails it under the promise.
func TestFollowWipe(t *testing.T) {
	t.Parallel()
	t.Run("reported", func(t *testing.T) {
		t.Parallel()
		rep, err := measure(t, wipingHarness{breakingHarness: breakingHarness{&followHarness{}}}, conformance.WithSkipSlow(true), only("follow-wipe"))
		if err != nil {
			t.Fatalf("%v\n%s", err, rep)
		}
		r := result(t, rep, "follow-wipe")
		if r.Skipped != "" || len(r.NotVerified) > 0 || r.Inconclusive != "" || len(r.Problems) > 0 {
			t.Fatalf("follow-wipe did not verify all it checks: %+v", r)
		}
		for _, how := range wipes {
			if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.HasPrefix(n, how+": seen as ") }) {
				t.Errorf("no note that the %s was seen: %q", how, r.Notes)
			}
		}
		if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.HasPrefix(n, "flush: seen as lost") }) {
			t.Errorf("the flush was not seen as Lost: %q", r.Notes)
		}
		t.Logf("%s", strings.Join(r.Notes, "; "))
	})
	for _, how := range wipes {
		t.Run("blind-"+how, func(t *testing.T) {
			t.Parallel()
			h := wipingHarness{breakingHarness{&followHarness{bug: blindToWipes}}, []string{how}}
			rep, err := measure(t, h, conformance.WithSkipSlow(true), only("follow-wipe"))
			wantBroken(t, rep, err, "follow-wipe", "follow-wipe")
		})
	}
	t.Run("no-wiper", func(t *testing.T) {
		t.Parallel()
		rep, err := measure(t, breakingHarness{&followHarness{networked: true}}, conformance.WithSkipSlow(true), only("follow-wipe"))
		r := result(t, rep, "follow-wipe")
		if len(r.NotVerified) == 0 {
			t.Errorf("follow-wipe without a Wiper: nothing reported not verified (err %v)\n%s", err, rep)
		}
	})
}
