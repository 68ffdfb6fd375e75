package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
)

// checkFollowWipe follows a prefix holding keys, has the harness change
// them behind the adapter's back (Wiper) each way it knows, and judges the
// feed at its first Synced whose At is after the wipe returned: the mirror
// built from it must hold what the store holds then (read back through the
// store), whether the feed said so as deletes, changes, Stale or Lost and a
// resynchronisation. A write after the wipe must then arrive too: a feed
// that said Lost must have come back.
func checkFollowWipe(ctx context.Context, e *env) {
	if _, ok := e.raw.(driver.Follower); !ok {
		e.logf("not applicable: the store (%T) does not implement driver.Follower (optional)", e.raw)
		return
	}
	w, ok := e.h.(Wiper)
	if !ok {
		e.notVerifiedf("keys changed behind the adapter's back: the harness does not implement Wiper (a bulk delete or replacement the store's own way, as an operator makes it)")
		return
	}
	hows := w.Wipes()
	if len(hows) == 0 {
		e.notVerifiedf("keys changed behind the adapter's back: the harness's Wiper names no way to wipe (Wipes is empty)")
		return
	}
	for i, how := range hows {
		if ctx.Err() != nil {
			return
		}
		wipeOnce(ctx, e, w, how, fmt.Sprintf("follow-wipe/%d/", i))
	}
}

// wipeOnce is checkFollowWipe for one way of wiping, on prefix.
func wipeOnce(ctx context.Context, e *env, w Wiper, how, prefix string) {
	keys := []string{prefix + "a.example", prefix + "b.example", prefix + "c.example"}
	wrote := map[string]driver.Version{}
	for _, k := range keys {
		ver, ok := e.followPut(ctx, promiseFollowWipe, k, driver.NoVersion, val("before "+k))
		if !ok {
			return
		}
		wrote[k] = ver
	}
	fd := e.follow(ctx, prefix)
	if fd == nil {
		return
	}
	defer fd.stop()
	_, iS := fd.initialSync(ctx, promiseFollowWipe)
	if iS < 0 {
		return
	}
	// A write the live feed carries, so the wipe meets a feed past its
	// snapshot, as a mirror's is.
	live := prefix + "live.example"
	keys = append(keys, live)
	lv, ok := e.followPut(ctx, promiseFollowWipe, live, driver.NoVersion, val("live"))
	if !ok {
		return
	}
	wrote[live] = lv
	ev, iL := fd.awaitSynced(ctx, promiseFollowWipe, iS+1, time.Now(), "a write before the "+how)
	if iL < 0 {
		return
	}
	before := len(ev)
	sent := time.Now()
	if err := w.Wipe(ctx, e.raw, how); err != nil {
		e.errorf(promiseFollowWipe, "Wiper.Wipe(%q) = %v", how, err)
		return
	}
	done := time.Now()
	want, since, ok := readBack(ctx, e, keys, sent)
	if !ok {
		return
	}
	if !slices.ContainsFunc(keys, func(k string) bool { return want[k] == nil || want[k].version != wrote[k] }) {
		e.notVerifiedf("the harness's %s (Wiper.Wipe) left every key as it was written: nothing to see", how)
		return
	}
	when := fmt.Sprintf("after the %s (%d of %d keys left), at the first Synced whose At is after it returned", how, countLive(want), len(keys))
	ev, iA := fd.awaitSynced(ctx, promiseFollowWipe, before, done, "the "+how+" returned")
	if iA < 0 {
		return
	}
	if !e.compareMirror(promiseFollowWipe, mirrorOf(ev[:iA+1]), want, since, when) {
		return
	}
	seen := "nothing"
	if j := slices.IndexFunc(ev[before:iA+1], func(a arrival) bool { return a.Kind != driver.ChangeSynced }); j >= 0 {
		a := ev[before+j]
		seen = fmt.Sprintf("as %s %v after it returned (MirrorStaleness is %v by default)", a, a.at.Sub(done).Round(time.Millisecond), kvbreaker.Settings{}.WithDefaults().MirrorStaleness)
	}
	e.logf("%s: seen %s; the first Synced after it came %v after it returned", how, seen, ev[iA].at.Sub(done).Round(time.Millisecond))

	// The feed goes on after the wipe: a key written now arrives.
	after := prefix + "after.example"
	since[after] = time.Now()
	av, ok := e.followPut(ctx, promiseFollowWipe, after, driver.NoVersion, val("after"))
	if !ok {
		return
	}
	want[after] = &entry{value: val("after"), version: av}
	ev, iN := fd.awaitSynced(ctx, promiseFollowWipe, iA+1, time.Now(), "a write after the "+how)
	if iN < 0 {
		return
	}
	e.compareMirror(promiseFollowWipe, mirrorOf(ev[:iN+1]), want, since, "after a write that followed the "+how)
}

// readBack reads keys through the store: what the wipe left (nil: absent).
// since holds sent for each key: a Stale arriving after it counts as the
// store's state.
func readBack(ctx context.Context, e *env, keys []string, sent time.Time) (map[string]*entry, map[string]time.Time, bool) {
	want := map[string]*entry{}
	since := map[string]time.Time{}
	for _, k := range keys {
		since[k] = sent
		v, ver, err := e.store.Get(ctx, k)
		switch {
		case errors.Is(err, driver.ErrNotFound):
			want[k] = nil
		case err != nil:
			e.errorf(promiseFollowWipe, "Get(%q) after the wipe = %v", k, err)
			return nil, nil, false
		default:
			want[k] = &entry{value: v, version: ver}
		}
	}
	return want, since, true
}

func countLive(m map[string]*entry) int {
	n := 0
	for _, v := range m {
		if v != nil {
			n++
		}
	}
	return n
}
