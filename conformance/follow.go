package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// The Follower cases hold driver.Follower to what a Breaker's mirror
// relies on: a snapshot that is the store's, every committed change once
// and in commit order per key (or a Stale of its key delivered after the
// change began: a mirror reads such a key from the store when it needs
// it, so it counts as the store's state then), a Synced whose At covers
// every change committed before it, a heartbeat while nothing happens, and a break in
// the feed said as Lost and followed by a resynchronisation, never resumed
// past a gap. Each case follows a prefix of its own store while it writes
// through the store, and judges the feed as it arrived: every message says
// what was committed and what arrived.

// defaultFollowHeartbeat is the heartbeat the cases pass to Follow: short
// enough that a case waits a second or two for its Synced.
const defaultFollowHeartbeat = 250 * time.Millisecond

// followStopWait is how long Follow may take to return once its context
// has ended.
const followStopWait = 5 * time.Second

// syncWait bounds the wait for a Synced a case needs: the feed promises one
// at least every heartbeat, so this is many heartbeats, plus seconds for a
// snapshot over a network and the declared read staleness.
func (e *env) syncWait() time.Duration {
	return 5*time.Second + 10*e.opts.FollowHeartbeat + 2*e.traits.ReadStaleness
}

// probeFollower says why s cannot follow (it is no driver.Follower, or its
// Follow answers errors.ErrUnsupported before sending anything), or "". It
// stops the Follow it started as soon as the first change arrives.
func probeFollower(ctx context.Context, s driver.Store) string {
	f, ok := s.(driver.Follower)
	if !ok {
		return fmt.Sprintf("the store MakeStore returns (%T) does not implement driver.Follower (optional)", s)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	first := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("panic: %v", p)
			}
		}()
		done <- f.Follow(ctx, "follow-probe/", defaultFollowHeartbeat, func(driver.Change) { once.Do(func() { close(first) }) })
	}()
	select {
	case err := <-done:
		if errors.Is(err, errors.ErrUnsupported) {
			return fmt.Sprintf("the store MakeStore returns (%T) answers Follow with %v", s, err)
		}
		return "" // the cases report any other answer
	case <-first:
	case <-ctx.Done():
	}
	cancel()
	select {
	case <-done:
	case <-time.After(followStopWait):
		// The follow-context promise is the cases' to judge.
	}
	return ""
}

// arrival is one change as the case received it.
type arrival struct {
	driver.Change
	// at is when fn received it, by the suite's clock.
	at time.Time
}

func (a arrival) String() string {
	switch a.Kind {
	case driver.ChangePut:
		return fmt.Sprintf("put %q v%d %.40q", a.Key, a.Version, a.Value)
	case driver.ChangeDelete:
		return fmt.Sprintf("delete %q v%d", a.Key, a.Version)
	case driver.ChangeStale:
		return fmt.Sprintf("stale %q", a.Key)
	case driver.ChangeSynced:
		return "synced at " + a.At.Format("15:04:05.000000")
	case driver.ChangeLost:
		return fmt.Sprintf("lost (%v)", a.Err)
	}
	return a.Kind.String()
}

// feed is one Follow a case runs, and everything it delivered.
type feed struct {
	e      *env
	prefix string
	start  time.Time
	cancel context.CancelFunc
	done   chan struct{} // closed when Follow has returned
	err    error         // what Follow returned, once done is closed

	inFn atomic.Int32

	mu         sync.Mutex
	events     []arrival
	wake       chan struct{} // closed and replaced by every arrival
	concurrent bool          // fn ran on two goroutines at once
	late       int           // calls of fn after Follow returned
	returned   bool
	early      bool // Follow's early return has been reported
}

// follow starts following prefix on the case's store, or returns nil after
// noting that the case does not apply.
func (e *env) follow(ctx context.Context, prefix string) *feed {
	f, ok := e.raw.(driver.Follower)
	if !ok {
		e.logf("not applicable: the store (%T) does not implement driver.Follower (optional)", e.raw)
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	fd := &feed{e: e, prefix: prefix, start: time.Now(), cancel: cancel, done: make(chan struct{}), wake: make(chan struct{})}
	go func() {
		var err error
		defer func() {
			if p := recover(); p != nil {
				e.errorf(promiseNoPanic, "Follow(%q) panicked: %v", prefix, p)
				err = fmt.Errorf("panic: %v", p)
			}
			fd.mu.Lock()
			fd.err, fd.returned = err, true
			fd.mu.Unlock()
			close(fd.done)
		}()
		err = f.Follow(ctx, prefix, e.opts.FollowHeartbeat, fd.fn)
	}()
	return fd
}

// fn is the callback the case hands Follow.
func (fd *feed) fn(c driver.Change) {
	if fd.inFn.Add(1) > 1 {
		fd.mu.Lock()
		fd.concurrent = true
		fd.mu.Unlock()
	}
	defer fd.inFn.Add(-1)
	c.Value = bytes.Clone(c.Value)
	now := time.Now()
	fd.mu.Lock()
	defer fd.mu.Unlock()
	if fd.returned {
		fd.late++
		return
	}
	fd.events = append(fd.events, arrival{Change: c, at: now})
	close(fd.wake)
	fd.wake = make(chan struct{})
}

// snapshot returns the changes received so far.
func (fd *feed) snapshot() []arrival {
	fd.mu.Lock()
	defer fd.mu.Unlock()
	return slices.Clone(fd.events)
}

// await waits up to limit for cond to hold over the changes received so
// far and returns them; ok is false when it did not (and Follow's early
// return, if that is why, has been reported).
func (fd *feed) await(ctx context.Context, limit time.Duration, cond func([]arrival) bool) ([]arrival, bool) {
	tm := time.NewTimer(limit)
	defer tm.Stop()
	for {
		fd.mu.Lock()
		ev, w := fd.events, fd.wake
		fd.mu.Unlock()
		if cond(ev) {
			return slices.Clone(ev), true
		}
		select {
		case <-w:
		case <-tm.C:
			return slices.Clone(ev), false
		case <-ctx.Done():
			return slices.Clone(ev), false
		case <-fd.done:
			fd.mu.Lock()
			ev = slices.Clone(fd.events)
			fd.mu.Unlock()
			if cond(ev) {
				return ev, true
			}
			fd.reportEarly(ctx)
			return ev, false
		}
	}
}

// reportEarly reports a Follow that returned while its context was live.
func (fd *feed) reportEarly(ctx context.Context) {
	fd.mu.Lock()
	defer fd.mu.Unlock()
	if fd.early || ctx.Err() != nil {
		return
	}
	fd.early = true
	fd.e.errorf(promiseFollowContext, "Follow(%q) returned %v after %v and %d change(s), while its context was live", fd.prefix, fd.err, time.Since(fd.start).Round(time.Millisecond), len(fd.events))
}

// syncedAfter returns the index of the first Synced at or after from whose
// At is after t, or -1.
func syncedAfter(ev []arrival, from int, t time.Time) int {
	for i := max(from, 0); i < len(ev); i++ {
		if ev[i].Kind == driver.ChangeSynced && ev[i].At.After(t) {
			return i
		}
	}
	return -1
}

// awaitSynced waits for a Synced after index from whose At is after t and
// returns the changes received and its index; it reports a violation of
// promise when none arrives within syncWait.
func (fd *feed) awaitSynced(ctx context.Context, promise PromiseID, from int, t time.Time, what string) ([]arrival, int) {
	limit := fd.e.syncWait()
	ev, ok := fd.await(ctx, limit, func(ev []arrival) bool { return syncedAfter(ev, from, t) >= 0 })
	if !ok {
		if ctx.Err() == nil {
			fd.e.errorf(promise, "no Synced with an At after %s (%s) arrived within %v (heartbeat %v); the feed delivered, after change %d: %s",
				what, t.Format("15:04:05.000000"), limit, fd.e.opts.FollowHeartbeat, from, describeEvents(ev[min(max(from, 0), len(ev)):]))
		}
		return ev, -1
	}
	return ev, syncedAfter(ev, from, t)
}

// stop ends the Follow, checks that it returns the context's error
// promptly and stops calling fn, and checks the feed's grammar.
func (fd *feed) stop() {
	fd.cancel()
	tm := time.NewTimer(followStopWait)
	defer tm.Stop()
	select {
	case <-fd.done:
		if !errors.Is(fd.err, context.Canceled) {
			fd.e.errorf(promiseFollowContext, "Follow(%q) returned %v once its context was canceled; want an error matching context.Canceled", fd.prefix, fd.err)
		}
	case <-tm.C:
		fd.e.errorf(promiseFollowContext, "Follow(%q) had not returned %v after its context was canceled", fd.prefix, followStopWait)
	}
	fd.mu.Lock()
	late, concurrent := fd.late, fd.concurrent
	ev := slices.Clone(fd.events)
	fd.mu.Unlock()
	if late > 0 {
		fd.e.errorf(promiseFollowContext, "Follow(%q) called fn %d time(s) after it returned", fd.prefix, late)
	}
	if concurrent {
		fd.e.errorf(promiseFollowFeed, "Follow(%q) called fn on two goroutines at once; it delivers one change at a time", fd.prefix)
	}
	fd.e.checkGrammar(fd.prefix, ev)
}

// checkGrammar holds the whole feed to its grammar: Reset, snapshot Puts,
// Synced, then changes and Synced; Lost then Reset before another Synced;
// keys under the prefix; Synced.At never backwards nor after its delivery.
func (e *env) checkGrammar(prefix string, ev []arrival) {
	const (
		begin = iota
		snap
		live
		lost
	)
	state := begin
	var lastAt time.Time
	reported := map[PromiseID]int{}
	bad := func(p PromiseID, i int, format string, args ...any) {
		reported[p]++
		if reported[p] > 3 {
			return // the first three say enough
		}
		e.errorf(p, "change %d of the feed (%s, %v after its first): %s; the changes around it: %s", i, ev[i], ev[i].at.Sub(ev[0].at).Round(time.Millisecond), fmt.Sprintf(format, args...), describeEvents(ev[max(0, i-3):min(len(ev), i+2)]))
	}
	for i, a := range ev {
		switch a.Kind {
		case driver.ChangePut, driver.ChangeDelete:
			if !strings.HasPrefix(a.Key, prefix) {
				bad(promiseFollowFeed, i, "the key is outside the followed prefix %q", prefix)
			}
			if a.Kind == driver.ChangePut && a.Version == driver.NoVersion {
				bad(promiseFollowFeed, i, "a Put with driver.NoVersion")
			}
			switch {
			case state == begin:
				bad(promiseFollowFeed, i, "a change before the feed's first Reset")
			case state == lost:
				bad(promiseFollowFeed, i, "a change after Lost and before the Reset that must follow it")
			case state == snap && a.Kind == driver.ChangeDelete:
				bad(promiseFollowFeed, i, "a Delete inside a snapshot (between Reset and Synced a feed sends only the live keys' Puts)")
			}
		case driver.ChangeStale:
			if !strings.HasPrefix(a.Key, prefix) {
				bad(promiseFollowFeed, i, "the key is outside the followed prefix %q", prefix)
			}
			switch state {
			case begin:
				bad(promiseFollowFeed, i, "a change before the feed's first Reset")
			case lost:
				bad(promiseFollowFeed, i, "a change after Lost and before the Reset that must follow it")
			}
		case driver.ChangeReset:
			if state == live {
				bad(promiseFollowFeed, i, "a Reset without a Lost before it: the caller would decide from a partial mirror until the Synced")
			}
			state = snap
		case driver.ChangeSynced:
			switch state {
			case begin:
				bad(promiseFollowFeed, i, "a Synced before the feed's first Reset")
			case lost:
				bad(promiseFollowFeed, i, "a Synced after Lost without a Reset and snapshot: the caller would decide on a mirror that missed changes")
			}
			if state != begin && state != lost {
				state = live
			}
			switch {
			case a.At.IsZero():
				bad(promiseFollowHeartbeat, i, "a Synced with a zero At")
			case a.At.Before(lastAt):
				bad(promiseFollowHeartbeat, i, "its At went back %v from the previous Synced's (%s)", lastAt.Sub(a.At), lastAt.Format("15:04:05.000000"))
			case a.At.After(a.at):
				bad(promiseFollowHeartbeat, i, "its At is %v later than its delivery (%s): it claims changes not yet committed were delivered", a.At.Sub(a.at), a.at.Format("15:04:05.000000"))
			}
			if a.At.After(lastAt) {
				lastAt = a.At
			}
		case driver.ChangeLost:
			if a.Err == nil {
				bad(promiseFollowFeed, i, "a Lost without Err (it must say why)")
			}
			state = lost
		default:
			bad(promiseFollowFeed, i, "an unknown ChangeKind %d", a.Kind)
		}
	}
	for p, n := range reported {
		if n > 3 {
			e.errorf(p, "and %d more such change(s) in the feed", n-3)
		}
	}
}

// describeEvents prints changes for a message.
func describeEvents(ev []arrival) string {
	if len(ev) == 0 {
		return "nothing"
	}
	const n = 12
	parts := make([]string, 0, n+1)
	for i, a := range ev {
		if i == n {
			parts = append(parts, fmt.Sprintf("… %d more", len(ev)-n))
			break
		}
		parts = append(parts, a.String())
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

// committed is one change a case made and the store acknowledged.
type committed struct {
	kind    driver.ChangeKind // ChangePut or ChangeDelete
	version driver.Version    // the new version; the deleted one for a delete
	value   []byte
	// start is when the write was sent: a Stale of the key that
	// arrived before it cannot report it.
	start time.Time
}

func (c committed) String() string {
	if c.kind == driver.ChangeDelete {
		return fmt.Sprintf("delete v%d", c.version)
	}
	return fmt.Sprintf("put v%d %.40q", c.version, c.value)
}

// matches says whether a delivered change is c: a Put with its version and
// value, or a Delete with its version or driver.NoVersion (a store that does
// not know the last version).
func (c committed) matches(a arrival) bool {
	if a.Kind != c.kind {
		return false
	}
	if c.kind == driver.ChangeDelete {
		return a.Version == c.version || a.Version == driver.NoVersion
	}
	return a.Version == c.version && bytes.Equal(a.Value, c.value)
}

func describeCommitted(cs []committed) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// changesOf returns the Puts, Deletes and Stales of key among ev.
func changesOf(ev []arrival, key string) []arrival {
	var out []arrival
	for _, a := range ev {
		if (a.Kind == driver.ChangePut || a.Kind == driver.ChangeDelete || a.Kind == driver.ChangeStale) && a.Key == key {
			out = append(out, a)
		}
	}
	return out
}

// hasKind says whether ev holds a change of kind k.
func hasKind(ev []arrival, k driver.ChangeKind) bool {
	return slices.ContainsFunc(ev, func(a arrival) bool { return a.Kind == k })
}

// compareSequence reports, under promise, a key whose delivered changes
// are not exactly the committed ones in commit order. absentBefore says the
// key was absent before want's first change: a merged feed may then deliver
// nothing at all for a key whose last change deletes it, since it ends as it
// began.
func (e *env) compareSequence(promise PromiseID, key string, want []committed, got []arrival, absentBefore bool, when string) bool {
	// A feed may merge a key's changes (a store that learns only which
	// keys changed re-reads them and delivers the latest), and may deliver
	// one change twice in a row (the snapshot and a re-read): what it
	// delivers is the committed sequence with changes left out, never an
	// older change after a newer one, and it ends with the last, or with
	// a Stale of the key that arrived after the last was sent (a Stale
	// names no change: it only says the key must be read).
	i, first := 0, -1
	var values []arrival // got without its Stales
	var at []int         // values[n] is got[at[n]]
	for j, a := range got {
		if a.Kind != driver.ChangeStale {
			values, at = append(values, a), append(at, j)
		}
	}
	for j, a := range values {
		if j > 0 && i > 0 && want[i-1].matches(a) && values[j-1].Kind == a.Kind && values[j-1].Version == a.Version {
			continue
		}
		for i < len(want) && !want[i].matches(a) {
			i++
		}
		if i == len(want) {
			first = j
			break
		}
		i++
	}
	complete := len(want) == 0 || (len(got) > 0 && want[len(want)-1].matches(got[len(got)-1])) ||
		(len(got) == 0 && absentBefore && want[len(want)-1].kind == driver.ChangeDelete) ||
		(len(got) > 0 && got[len(got)-1].Kind == driver.ChangeStale && !got[len(got)-1].at.Before(want[len(want)-1].start))
	if first < 0 && complete {
		return true
	}
	var where string
	switch {
	case first >= 0:
		where = fmt.Sprintf("delivered change %d (%s) is not a committed change after the one delivered before it", at[first]+1, values[first])
	default:
		where = fmt.Sprintf("the last committed change, %s, was not the last delivered", want[len(want)-1])
	}
	e.errorf(promise, "key %q %s: committed in this order %s; the feed delivered %s: %s", key, when, describeCommitted(want), describeEvents(got), where)
	return false
}

// entry is a key's value and version in a mirror.
type entry struct {
	value   []byte
	version driver.Version
	// staleAt, in a mirror, is when a Stale of the key arrived with
	// nothing after it: a Breaker reads the key from the store when it
	// needs it.
	staleAt time.Time
}

// mirrorOf applies ev (up to a Synced) as a Breaker's mirror does: Reset
// forgets everything, Put sets, Delete removes, Stale marks the key to be
// read.
func mirrorOf(ev []arrival) map[string]entry {
	m := map[string]entry{}
	for _, a := range ev {
		switch a.Kind {
		case driver.ChangeReset:
			clear(m)
		case driver.ChangePut:
			m[a.Key] = entry{value: a.Value, version: a.Version}
		case driver.ChangeDelete:
			delete(m, a.Key)
		case driver.ChangeStale:
			m[a.Key] = entry{staleAt: a.at}
		}
	}
	return m
}

// compareMirror reports, under promise, how mirror differs from want (nil
// entries: absent) for the keys of want, and any other key mirror holds. A
// key the mirror holds as stale is the store's state (a Breaker reads it)
// if its Stale arrived no earlier than since[key], when the key's last
// write was sent.
func (e *env) compareMirror(promise PromiseID, mirror map[string]entry, want map[string]*entry, since map[string]time.Time, when string) bool {
	var diffs []string
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		w := want[k]
		got, has := mirror[k]
		switch {
		case has && !got.staleAt.IsZero() && !got.staleAt.Before(since[k]):
		case has && !got.staleAt.IsZero():
			diffs = append(diffs, fmt.Sprintf("%q: the mirror's last word is a Stale that arrived %v before the key's last write was sent", k, since[k].Sub(got.staleAt).Round(time.Microsecond)))
		case w == nil && has:
			diffs = append(diffs, fmt.Sprintf("%q: the store holds nothing, the mirror v%d %.40q", k, got.version, got.value))
		case w != nil && !has:
			diffs = append(diffs, fmt.Sprintf("%q: the store holds v%d %.40q, the mirror nothing", k, w.version, w.value))
		case w != nil && (got.version != w.version || !bytes.Equal(got.value, w.value)):
			diffs = append(diffs, fmt.Sprintf("%q: the store holds v%d %.40q, the mirror v%d %.40q", k, w.version, w.value, got.version, got.value))
		}
	}
	var extra []string
	for k := range mirror {
		if _, ok := want[k]; !ok {
			extra = append(extra, k)
		}
	}
	slices.Sort(extra)
	if len(extra) > 0 {
		diffs = append(diffs, fmt.Sprintf("keys the case never wrote: %s", sample(extra)))
	}
	if len(diffs) == 0 {
		return true
	}
	e.errorf(promise, "%s, the mirror built from the feed differs from the store: %s", when, sampleRaw(diffs))
	return false
}

// followPut is a compare-and-swap a case makes, reporting a failure under
// promise.
func (e *env) followPut(ctx context.Context, promise PromiseID, key string, old driver.Version, value []byte) (driver.Version, bool) {
	ver, err := e.store.CompareAndSwap(ctx, key, old, value, ttl)
	if err != nil {
		e.errorf(promise, "CompareAndSwap(%q, %d) = %v", key, old, err)
		return 0, false
	}
	if ver == driver.NoVersion {
		e.errorf(promiseCreate, "CompareAndSwap(%q, %d) returned driver.NoVersion", key, old)
		return 0, false
	}
	return ver, true
}

// followDelete is a compare-and-delete a case makes, reporting a failure
// under promise.
func (e *env) followDelete(ctx context.Context, promise PromiseID, key string, ver driver.Version) bool {
	if err := e.store.CompareAndDelete(ctx, key, ver); err != nil {
		e.errorf(promise, "CompareAndDelete(%q, %d) = %v", key, ver, err)
		return false
	}
	return true
}

// initialSync waits for the feed's first Synced and returns its index.
func (fd *feed) initialSync(ctx context.Context, promise PromiseID) ([]arrival, int) {
	ev, i := fd.awaitSynced(ctx, promise, 0, time.Time{}, "the feed's start")
	return ev, i
}

// checkFollowSnapshot writes keys under the prefix and beside it, deletes
// one and updates another, then follows: the snapshot must be exactly the
// live keys under the prefix, each with its last value and version; keys
// written beside it afterwards must not arrive either.
func checkFollowSnapshot(ctx context.Context, e *env) {
	const prefix = "follow-snapshot/"
	want := map[string]*entry{}
	since := map[string]time.Time{}
	put := func(key string, value []byte) bool {
		old := driver.NoVersion
		if w := want[key]; w != nil {
			old = w.version
		}
		since[key] = time.Now()
		ver, ok := e.followPut(ctx, promiseFollowSnapshot, key, old, value)
		if ok {
			want[key] = &entry{value: value, version: ver}
		}
		return ok
	}
	for _, k := range []string{prefix + "a.example", prefix + "b.example", prefix + "sub/c.example", prefix + "bücher.example", prefix + "updated.example", prefix + "deleted.example", prefix} {
		if !put(k, val("first "+k)) {
			return
		}
	}
	if !put(prefix+"updated.example", val("second")) || !put(prefix+"updated.example", val("third")) || !put(prefix+"empty.example", []byte{}) {
		return
	}
	since[prefix+"deleted.example"] = time.Now()
	if !e.followDelete(ctx, promiseFollowSnapshot, prefix+"deleted.example", want[prefix+"deleted.example"].version) {
		return
	}
	want[prefix+"deleted.example"] = nil
	outside := []string{"follow-snapshot", "follow-snapshoT/x.example", "follow-snapshot0/x.example", "follow-snapshot.example", "a.example"}
	for _, k := range outside {
		if _, ok := e.followPut(ctx, promiseFollowSnapshot, k, driver.NoVersion, val("outside")); !ok {
			return
		}
	}
	written := time.Now()
	// A store may show a write to Get only after its declared staleness;
	// its feed's snapshot may lag as much.
	_ = sleep(ctx, e.traits.ReadStaleness)
	fd := e.follow(ctx, prefix)
	if fd == nil {
		return
	}
	defer fd.stop()
	ev, iS := fd.initialSync(ctx, promiseFollowSnapshot)
	if iS < 0 {
		return
	}
	// The snapshot is what follows the last Reset before that Synced.
	iR := -1
	for i := iS - 1; i >= 0; i-- {
		if ev[i].Kind == driver.ChangeReset {
			iR = i
			break
		}
	}
	if iR < 0 {
		e.errorf(promiseFollowSnapshot, "the feed's first Synced came without a Reset before it: %s", describeEvents(ev[:iS+1]))
		return
	}
	snap := ev[iR+1 : iS]
	count := map[string]int{}
	for _, a := range snap {
		if a.Kind == driver.ChangePut {
			count[a.Key]++
		}
	}
	for k, n := range count {
		if n > 1 {
			e.errorf(promiseFollowSnapshot, "the snapshot holds %q %d times: %s", k, n, describeEvents(changesOf(snap, k)))
		}
	}
	e.compareMirror(promiseFollowSnapshot, mirrorOf(ev[:iS+1]), want, since, fmt.Sprintf("at the snapshot's Synced (%d Put(s) after Reset, writes finished %v before Follow began)", len(snap), fd.start.Sub(written).Round(time.Millisecond)))
	// Writes beside the prefix while following must not arrive either;
	// one under it shows when the feed has caught up.
	for _, k := range outside {
		if _, _, err := e.store.Get(ctx, k); err != nil {
			e.errorf(promiseRead, "Get(%q) = %v", k, err)
			return
		}
	}
	for _, k := range outside[1:] {
		if _, ok := e.followPut(ctx, promiseFollowSnapshot, k+".2", driver.NoVersion, val("outside, while following")); !ok {
			return
		}
	}
	last := prefix + "after.example"
	if !put(last, val("after the snapshot")) {
		return
	}
	done := time.Now()
	ev, iA := fd.awaitSynced(ctx, promiseFollowSnapshot, iS+1, done, "the last write returned")
	if iA < 0 {
		return
	}
	e.compareMirror(promiseFollowSnapshot, mirrorOf(ev[:iA+1]), want, since, "at the first Synced after a write that followed the snapshot")
	e.logf("snapshot of %d live keys (one updated twice, one deleted, one empty) beside %d keys outside the prefix", len(snap), len(outside))
}

// script is one goroutine's writes to one key in follow-order.
type script struct {
	key string
	ops string // p: put (create if absent), d: delete
}

// checkFollowOrder has goroutines write, delete and re-create keys (one
// existing before the snapshot), and a key beside the prefix, at once;
// at the first Synced after the last write returned, each key's changes
// must be exactly the committed ones, in order, and nothing may arrive
// for them after it.
func checkFollowOrder(ctx context.Context, e *env) {
	const prefix = "follow-order/"
	pre := prefix + "pre.example"
	preVer, ok := e.followPut(ctx, promiseFollowOrder, pre, driver.NoVersion, val("before the snapshot"))
	if !ok {
		return
	}
	_ = sleep(ctx, e.traits.ReadStaleness)
	fd := e.follow(ctx, prefix)
	if fd == nil {
		return
	}
	defer fd.stop()
	_, iS := fd.initialSync(ctx, promiseFollowOrder)
	if iS < 0 {
		return
	}
	scripts := []script{
		{pre, "ppdpp"},
		{prefix + "a.example", "pppdp"},
		{prefix + "b.example", "pdpdpd"},
		{prefix + "c.example", "pppppp"},
		{prefix + "d/é.example", "pdpp"},
	}
	logs := make([][]committed, len(scripts))
	// rets[i][n] is when logs[i][n]'s write returned: committed by then.
	rets := make([][]time.Time, len(scripts))
	var wg sync.WaitGroup
	for i, sc := range scripts {
		cur := driver.NoVersion
		if sc.key == pre {
			cur = preVer
		}
		wg.Go(func() {
			for n, op := range sc.ops {
				if ctx.Err() != nil {
					return
				}
				switch op {
				case 'p':
					value := val(fmt.Sprintf("%s #%d", sc.key, n))
					start := time.Now()
					ver, ok := e.followPut(ctx, promiseFollowOrder, sc.key, cur, value)
					if !ok {
						return
					}
					logs[i] = append(logs[i], committed{driver.ChangePut, ver, value, start})
					rets[i] = append(rets[i], time.Now())
					cur = ver
				case 'd':
					start := time.Now()
					if !e.followDelete(ctx, promiseFollowOrder, sc.key, cur) {
						return
					}
					logs[i] = append(logs[i], committed{driver.ChangeDelete, cur, nil, start})
					rets[i] = append(rets[i], time.Now())
					cur = driver.NoVersion
				}
				yield()
			}
		})
	}
	wg.Go(func() {
		// Beside the prefix, interleaved with the others.
		cur := driver.NoVersion
		for n := range 4 {
			ver, ok := e.followPut(ctx, promiseFollowOrder, "follow-order.example", cur, val(fmt.Sprint("outside #", n)))
			if !ok {
				return
			}
			cur = ver
			yield()
		}
	})
	wg.Wait()
	done := time.Now()
	if ctx.Err() != nil {
		return
	}
	ev, iA := fd.awaitSynced(ctx, promiseFollowOrder, iS+1, done, "the last write returned")
	if iA < 0 {
		return
	}
	after := ev[iS+1 : iA+1]
	if hasKind(after, driver.ChangeLost) {
		// A resynchronisation replaces what came before it: judge the
		// mirror only.
		e.logf("the feed said Lost during the writes (%s); the order of changes was checked only as the mirror they leave", describeEvents(after))
		want := map[string]*entry{}
		since := map[string]time.Time{}
		for i, sc := range scripts {
			want[sc.key] = lastEntry(logs[i])
			if n := len(logs[i]); n > 0 {
				since[sc.key] = logs[i][n-1].start
			}
		}
		e.compareMirror(promiseFollowOrder, mirrorOf(ev[:iA+1]), want, since, "at the first Synced after the last write returned")
		return
	}
	// Every Synced vouches for the changes committed before its At: the
	// last change of each key whose write had returned by then, or a
	// later one, must have arrived before it.
	for j := iS + 1; j <= iA; j++ {
		if ev[j].Kind != driver.ChangeSynced {
			continue
		}
		for i, sc := range scripts {
			last := -1
			for n, r := range rets[i] {
				if r.Before(ev[j].At) {
					last = n
				}
			}
			if last < 0 {
				continue
			}
			// The key's state by that Synced must be that change's or a
			// later one's (a merged feed may deliver nothing for a key
			// that ends as it was: absent, deleted again), or a Stale
			// sent after that change began.
			before := changesOf(ev[iS+1:j], sc.key)
			got, present := mirrorOf(ev[:j])[sc.key]
			if present && !got.staleAt.IsZero() {
				if !got.staleAt.Before(logs[i][last].start) {
					continue
				}
				present = false // a Stale older than the change: no state
			}
			if !slices.ContainsFunc(logs[i][last:], func(c committed) bool {
				if c.kind == driver.ChangeDelete {
					return !present
				}
				return present && got.version == c.version && bytes.Equal(got.value, c.value)
			}) {
				e.errorf(promiseFollowOrder, "key %q: its change %s had returned by %s, but the Synced with At %s (delivered at %s) came before it arrived; before that Synced the feed had delivered %s",
					sc.key, logs[i][last], rets[i][last].Format("15:04:05.000000"), ev[j].At.Format("15:04:05.000000"), ev[j].at.Format("15:04:05.000000"), describeEvents(before))
				return
			}
		}
	}
	total := 0
	for i, sc := range scripts {
		total += len(logs[i])
		e.compareSequence(promiseFollowOrder, sc.key, logs[i], changesOf(after, sc.key), sc.key != pre, fmt.Sprintf("by the first Synced after the last write returned (At %s)", ev[iA].At.Format("15:04:05.000000")))
	}
	// Nothing more may arrive for them: the Synced said all had.
	ev, iB := fd.awaitSynced(ctx, promiseFollowHeartbeat, iA+1, ev[iA].At, "the Synced that covered the writes")
	if iB < 0 {
		return
	}
	for _, sc := range scripts {
		if more := changesOf(ev[iA+1:iB+1], sc.key); len(more) > 0 && !hasKind(ev[iA+1:iB+1], driver.ChangeReset) {
			e.errorf(promiseFollowOrder, "key %q: %s arrived after the Synced (At %s) that said every change committed before it had been delivered, and nothing was written since", sc.key, describeEvents(more), ev[iA].At.Format("15:04:05.000000"))
		}
	}
	e.logf("%d goroutines committed %d changes to %d keys (writes, deletes, re-creations), with writes beside the prefix between them; each key's changes arrived in commit order", len(scripts), total, len(scripts))
}

// lastEntry is what a key holds after cs (nil: absent).
func lastEntry(cs []committed) *entry {
	if len(cs) == 0 || cs[len(cs)-1].kind == driver.ChangeDelete {
		return nil
	}
	c := cs[len(cs)-1]
	return &entry{value: c.value, version: c.version}
}

// swap is one successful compare-and-swap of the storm.
type swap struct {
	old, new   driver.Version
	value      []byte
	start, ret time.Time // when it was sent, and when it returned
}

// checkFollowStorm races goroutines through read-then-swap rounds on a few
// keys; once quiet, at the first Synced after the last write returned, the
// mirror must equal the store, and each key's Puts must be its chain of
// successful swaps in order.
func checkFollowStorm(ctx context.Context, e *env) {
	const prefix = "follow-storm/"
	keys := []string{prefix + "a.example", prefix + "b.example", prefix + "c.example"}
	fd := e.follow(ctx, prefix)
	if fd == nil {
		return
	}
	defer fd.stop()
	_, iS := fd.initialSync(ctx, promiseFollowMirror)
	if iS < 0 {
		return
	}
	var (
		mu        sync.Mutex
		swaps     = map[string][]swap{}
		conflicts int
		unknown   []string
	)
	var wg sync.WaitGroup
	for g := range e.opts.Goroutines {
		wg.Go(func() {
			for n := range e.opts.Iterations {
				if ctx.Err() != nil {
					return
				}
				key := keys[(g+n)%len(keys)]
				_, cur, err := e.store.Get(ctx, key)
				if err != nil && !errors.Is(err, driver.ErrNotFound) {
					e.errorf(promiseRead, "Get(%q) = %v", key, err)
					return
				}
				value := val(fmt.Sprintf("g%d #%d", g, n))
				start := time.Now()
				ver, err := e.store.CompareAndSwap(ctx, key, cur, value, ttl)
				ret := time.Now()
				mu.Lock()
				switch {
				case err == nil:
					swaps[key] = append(swaps[key], swap{cur, ver, value, start, ret})
				case errors.Is(err, driver.ErrConflict):
					conflicts++
				default:
					unknown = append(unknown, fmt.Sprintf("CompareAndSwap(%q, %d) = %v", key, cur, err))
				}
				mu.Unlock()
				yield()
			}
		})
	}
	wg.Wait()
	done := time.Now()
	if ctx.Err() != nil {
		return
	}
	ev, iA := fd.awaitSynced(ctx, promiseFollowMirror, iS+1, done, "the storm's last write returned")
	if iA < 0 {
		return
	}
	// The store's answer, read once the storm is quiet; a Stale reports
	// the last swap of its key only if it arrived after every successful
	// swap was sent (one of them committed last).
	want := map[string]*entry{}
	since := map[string]time.Time{}
	for _, k := range keys {
		for _, sw := range swaps[k] {
			if sw.start.After(since[k]) {
				since[k] = sw.start
			}
		}
		v, ver, err := e.store.Get(ctx, k)
		switch {
		case errors.Is(err, driver.ErrNotFound):
			want[k] = nil
		case err != nil:
			e.errorf(promiseRead, "Get(%q) = %v", k, err)
			return
		default:
			want[k] = &entry{value: v, version: ver}
		}
	}
	e.compareMirror(promiseFollowMirror, mirrorOf(ev[:iA+1]), want, since, fmt.Sprintf("at the first Synced after the storm's last write returned (At %s)", ev[iA].At.Format("15:04:05.000000")))
	total := 0
	for _, k := range keys {
		total += len(swaps[k])
	}
	e.logf("%d goroutines made %d successful swaps and met %d conflicts on %d keys", e.opts.Goroutines, total, conflicts, len(keys))
	after := ev[iS+1 : iA+1]
	switch {
	case len(unknown) > 0:
		e.logf("%d write(s) ended with an unknown outcome, so the order of Puts was not checked: %s", len(unknown), sampleRaw(unknown))
		return
	case !e.traits.Atomic:
		e.logf("the store is not atomic (last writer wins), so no chain of swaps fixes the commit order: only the mirror was checked")
		return
	case hasKind(after, driver.ChangeLost):
		e.logf("the feed said Lost during the storm; the order of Puts was not checked")
		return
	}
	for _, k := range keys {
		chain, ok := chainOf(swaps[k])
		if !ok {
			e.logf("%q: the successful swaps do not form one chain (see %s)", k, caseLinearizable)
			continue
		}
		if !e.stormSyncedCovers(k, chain, swaps[k], ev, iS, iA) {
			continue
		}
		e.compareSequence(promiseFollowOrder, k, chain, changesOf(after, k), true, "in the storm")
	}
}

// stormSyncedCovers reports, under "follow-commit-order", a Synced among
// ev(iS, iA] that arrived before key's swap that had returned by its At: the
// key's state by that Synced must be that swap's or a later one's in chain,
// or a Stale that arrived after that swap was sent. A feed whose changes
// trail its Synced is caught here whatever the storm's timing, while the
// mirror at the end may have caught up.
func (e *env) stormSyncedCovers(key string, chain []committed, ss []swap, ev []arrival, iS, iA int) bool {
	ret := make(map[driver.Version]time.Time, len(ss))
	for _, s := range ss {
		ret[s.new] = s.ret
	}
	for j := iS + 1; j <= iA; j++ {
		if ev[j].Kind != driver.ChangeSynced {
			continue
		}
		last := -1
		for n, c := range chain {
			if ret[c.version].Before(ev[j].At) {
				last = n
			}
		}
		if last < 0 {
			continue
		}
		got, present := mirrorOf(ev[:j])[key]
		if present && !got.staleAt.IsZero() {
			if !got.staleAt.Before(chain[last].start) {
				continue
			}
			present = false
		}
		if present && slices.ContainsFunc(chain[last:], func(c committed) bool {
			return got.version == c.version && bytes.Equal(got.value, c.value)
		}) {
			continue
		}
		e.errorf(promiseFollowOrder, "key %q: its swap to %s had returned by %s, but the Synced with At %s (delivered at %s) came before it or a later one arrived; before that Synced the feed had delivered %s",
			key, chain[last], ret[chain[last].version].Format("15:04:05.000000"), ev[j].At.Format("15:04:05.000000"), ev[j].at.Format("15:04:05.000000"), describeEvents(changesOf(ev[iS+1:j], key)))
		return false
	}
	return true
}

// chainOf orders a key's successful swaps by their versions: each replaced
// the one before, starting from absent. ok is false when they do not form
// one chain (a store that lost an update).
func chainOf(ss []swap) ([]committed, bool) {
	next := make(map[driver.Version]swap, len(ss))
	for _, s := range ss {
		if _, dup := next[s.old]; dup {
			return nil, false
		}
		next[s.old] = s
	}
	out := make([]committed, 0, len(ss))
	for v := driver.NoVersion; ; {
		s, ok := next[v]
		if !ok {
			break
		}
		out = append(out, committed{driver.ChangePut, s.new, s.value, s.start})
		v = s.new
		if len(out) > len(ss) {
			return nil, false
		}
	}
	return out, len(out) == len(ss)
}

// checkFollowHeartbeat follows an idle prefix for a number of heartbeats:
// Synced must arrive at least every heartbeat (plus slack), each At later
// than the last and no later than its delivery, and recent.
func checkFollowHeartbeat(ctx context.Context, e *env) {
	const prefix = "follow-heartbeat/"
	h := e.opts.FollowHeartbeat
	fd := e.follow(ctx, prefix)
	if fd == nil {
		return
	}
	defer fd.stop()
	_, iS := fd.initialSync(ctx, promiseFollowHeartbeat)
	if iS < 0 {
		return
	}
	const beats = 8
	window := beats * h
	stalls := watchStalls()
	defer stalls.close()
	if err := sleep(ctx, window); err != nil {
		return
	}
	end := time.Now()
	ev := fd.snapshot()
	// A heartbeat timer fires every h and the Synced it sends may need a
	// round trip to the server to learn its instant; a loaded machine
	// delays a goroutine by tens of milliseconds now and then. So one gap
	// may reach twice the heartbeat plus 100 ms, but on average they must
	// stay within a quarter heartbeat (plus 25 ms) of it: a feed that
	// beats at half the rate fails either way.
	maxGap := 2*h + 100*time.Millisecond
	meanGap := h + h/4 + 25*time.Millisecond
	maxLag := h + 100*time.Millisecond
	prev := ev[iS]
	var gaps []time.Duration
	var worstLag time.Duration
	var worstFrom, worstTo, lagFrom, lagTo time.Time
	for _, a := range ev[iS+1:] {
		switch a.Kind {
		case driver.ChangeSynced:
			g := a.at.Sub(prev.at)
			if g > worstTo.Sub(worstFrom) {
				worstFrom, worstTo = prev.at, a.at
			}
			gaps = append(gaps, g)
			if lag := a.at.Sub(a.At); lag > worstLag {
				worstLag, lagFrom, lagTo = lag, a.At, a.at
			}
			prev = a
		case driver.ChangeLost, driver.ChangeReset:
			e.logf("the feed resynchronised while idle: %s", a)
		default:
			e.errorf(promiseFollowFeed, "%s arrived on a prefix nothing writes", a)
		}
	}
	tail := end.Sub(prev.at)
	var sum, worst time.Duration
	for _, g := range gaps {
		sum += g
		worst = max(worst, g)
	}
	switch {
	case len(gaps) == 0:
		e.errorf(promiseFollowHeartbeat, "no Synced arrived in the %v after the snapshot's, with heartbeat %v and no writes", window, h)
		return
	case worst > maxGap:
		// Stalls of this process that cover the overrun: without them the
		// gap was within the bound, so the load decided it.
		if st := stalls.within(worstFrom, worstTo); st >= worst-maxGap {
			e.undecidedf("with heartbeat %v and no writes, %v passed between two Synced (at most %v allowed), %v of it with this process stalled (the machine's load); the gaps: %v", h, worst.Round(time.Millisecond), maxGap, st.Round(time.Millisecond), roundAll(gaps))
			break
		}
		e.errorf(promiseFollowHeartbeat, "with heartbeat %v and no writes, %v passed between two Synced (at most %v allowed: twice the heartbeat plus 100 ms); the gaps: %v", h, worst.Round(time.Millisecond), maxGap, roundAll(gaps))
	case tail > maxGap:
		if st := stalls.within(prev.at, end); st >= tail-maxGap {
			e.undecidedf("with heartbeat %v and no writes, no Synced arrived in the last %v of the %v watched (at most %v allowed), %v of it with this process stalled (the machine's load)", h, tail.Round(time.Millisecond), window, maxGap, st.Round(time.Millisecond))
			break
		}
		e.errorf(promiseFollowHeartbeat, "with heartbeat %v and no writes, no Synced arrived in the last %v of the %v watched (at most %v allowed); the gaps before: %v", h, tail.Round(time.Millisecond), window, maxGap, roundAll(gaps))
	case sum/time.Duration(len(gaps)) > meanGap:
		over := sum - meanGap*time.Duration(len(gaps))
		if st := stalls.within(ev[iS].at, prev.at); st >= over {
			e.undecidedf("with heartbeat %v and no writes, Synced arrived every %v on average over %d beats (at most %v allowed), and the machine's load took %v from this process in those beats, more than the %v over; the gaps: %v", h, (sum / time.Duration(len(gaps))).Round(time.Millisecond), len(gaps), meanGap, st.Round(time.Millisecond), over.Round(time.Millisecond), roundAll(gaps))
			break
		}
		e.errorf(promiseFollowHeartbeat, "with heartbeat %v and no writes, Synced arrived every %v on average over %d beats (at most %v allowed); the gaps: %v", h, (sum / time.Duration(len(gaps))).Round(time.Millisecond), len(gaps), meanGap, roundAll(gaps))
	}
	if worstLag > maxLag {
		if st := stalls.within(lagFrom, lagTo); st >= worstLag-maxLag {
			e.undecidedf("a Synced arrived %v after its At (at most the heartbeat %v plus 100 ms allowed), and the machine's load took %v from this process in between", worstLag.Round(time.Millisecond), h, st.Round(time.Millisecond))
		} else {
			e.errorf(promiseFollowHeartbeat, "a Synced arrived %v after its At (at most the heartbeat %v plus 100 ms allowed): an idle feed's At must keep up with the clock", worstLag.Round(time.Millisecond), h)
		}
	}
	e.logf("heartbeat %v: %d Synced in %v idle, gaps up to %v (mean %v), At up to %v behind delivery",
		h, len(gaps), window, worst.Round(time.Millisecond), (sum / time.Duration(max(len(gaps), 1))).Round(time.Millisecond), worstLag.Round(time.Millisecond))
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// checkFollowExpiry lets a key expire while the feed follows it. A store
// that reports expiry delivers a Delete, not before Get finds the key gone
// (less the declared read staleness); one that does not delivers nothing.
// Either way the key must not arrive as a Put again: nothing wrote it.
func checkFollowExpiry(ctx context.Context, e *env) {
	const prefix = "follow-expiry/"
	key := prefix + "expiring.example"
	fd := e.follow(ctx, prefix)
	if fd == nil {
		return
	}
	defer fd.stop()
	_, iS := fd.initialSync(ctx, promiseFollowExpiry)
	if iS < 0 {
		return
	}
	ttl := e.opts.ExpiryTTL
	_, _, hi := e.windowFor(ttl)
	ver, ok := e.create(ctx, key, val("expiring"), ttl)
	if !ok {
		return
	}
	written := time.Now()
	// lastPresent is when a Get that found the key was issued; gone when
	// the first that did not was answered.
	lastPresent, gone := written, time.Time{}
	interval := min(max(ttl/50, 10*time.Millisecond), 250*time.Millisecond)
	if adv, ok := e.h.(TimeAdvancer); ok {
		// The model's latest end, on the harness's clock.
		lastPresent = time.Now()
		if err := adv.Advance(ctx, hi+time.Millisecond); err != nil {
			e.errorf(promiseFollowExpiry, "TimeAdvancer.Advance(%v) = %v", hi, err)
			return
		}
		e.advanced += hi + time.Millisecond
		hi = 0
	}
	for gone.IsZero() {
		s := time.Now()
		present, ok := e.present(ctx, key, ver)
		if !ok {
			return
		}
		if present {
			lastPresent = s
			if s.Sub(written) > hi+e.traits.ReadStaleness+2*time.Second {
				e.errorf(promiseNotLate, "%q written with TTL %v is still present %v after the write", key, ttl, s.Sub(written).Round(time.Millisecond))
				return
			}
			_ = sleep(ctx, interval)
			continue
		}
		gone = time.Now()
	}
	// Wait for the feed to cover the instant Get found the key gone, and a
	// heartbeat more for a store that reports expiry as its backend
	// deletes. Not the declared Late: that bounds when Get finds the key
	// gone (etcd's is a minute), which is measured above; a Delete a
	// reader-filtered store's purge sends later is allowed, not awaited.
	ev, iA := fd.awaitSynced(ctx, promiseFollowExpiry, iS+1, gone.Add(e.opts.FollowHeartbeat), "the key expired")
	if iA < 0 {
		return
	}
	got := changesOf(ev[iS+1:], key)
	write := committed{kind: driver.ChangePut, version: ver, value: val("expiring")}
	if len(got) == 0 || !write.matches(got[0]) && got[0].Kind != driver.ChangeStale {
		e.errorf(promiseFollowOrder, "key %q: committed [put v%d \"expiring\"]; the feed delivered %s", key, ver, describeEvents(got))
		return
	}
	// A Stale (of the write, or of the expiry) says nothing of when the
	// key expired: a mirror reads it. Only the Puts and Deletes after the
	// write's are judged.
	rest := got[1:]
	if got[0].Kind == driver.ChangeStale {
		if i := slices.IndexFunc(rest, write.matches); i >= 0 {
			rest = rest[i+1:]
		}
	}
	got = slices.DeleteFunc(slices.Clone(rest), func(a arrival) bool { return a.Kind == driver.ChangeStale })
	for i, a := range got {
		switch {
		case a.Kind == driver.ChangePut:
			e.errorf(promiseFollowExpiry, "key %q arrived as %s after it was written once (v%d) and expired: nothing wrote it again", key, a, ver)
		case i > 0:
			e.errorf(promiseFollowExpiry, "key %q: a second Delete (%s) after it expired once", key, a)
		case a.Version != ver && a.Version != driver.NoVersion:
			e.errorf(promiseFollowExpiry, "key %q expired at v%d, but the feed's Delete names v%d", key, ver, a.Version)
		case a.at.Add(e.traits.ReadStaleness).Before(lastPresent):
			e.errorf(promiseFollowExpiry, "key %q: the feed delivered its Delete %v after the write, but a Get issued %v after the write still found it (TTL %v, declared Early %v, Granularity %v, ReadStaleness %v)",
				key, a.at.Sub(written).Round(time.Millisecond), lastPresent.Sub(written).Round(time.Millisecond), ttl, e.traits.Expiry.Early, e.traits.Expiry.Granularity, e.traits.ReadStaleness)
		default:
			e.logf("the store reports expiry: the Delete arrived %v after the write (TTL %v), %v after Get found the key gone", a.at.Sub(written).Round(time.Millisecond), ttl, a.at.Sub(gone).Round(time.Millisecond))
		}
	}
	if len(got) == 0 {
		e.logf("the store does not report expiry (allowed: driver.Follower delivers a Delete for each expiry the store reports): no Delete by the first Synced %v after Get found the key gone", e.opts.FollowHeartbeat)
	}
}

// checkFollowLost breaks the feed's connection (FeedBreaker) and, at once,
// writes, updates and deletes: the feed must either say Lost and
// resynchronise, its new snapshot or later changes holding every one of
// those writes, or resume having missed none of them.
func checkFollowLost(ctx context.Context, e *env) {
	if _, ok := e.raw.(driver.Follower); !ok {
		e.logf("not applicable: the store (%T) does not implement driver.Follower (optional)", e.raw)
		return
	}
	b, ok := e.h.(FeedBreaker)
	if !ok {
		if e.traits.InProcess {
			e.logf("not applicable: the store answers in process (Traits.InProcess), so there is no connection to break")
			return
		}
		e.notVerifiedf("a feed whose connection breaks: the harness does not implement FeedBreaker (put a fault proxy, package conformance/faultproxy, between the follower and the server; its BreakFeed resets the connections)")
		return
	}
	const prefix = "follow-lost/"
	kept, moved, doomed := prefix+"kept.example", prefix+"moved.example", prefix+"doomed.example"
	want := map[string]*entry{}
	since := map[string]time.Time{} // when each key's last write was sent
	for _, k := range []string{kept, moved, doomed} {
		since[k] = time.Now()
		ver, ok := e.followPut(ctx, promiseFollowLost, k, driver.NoVersion, val("before "+k))
		if !ok {
			return
		}
		want[k] = &entry{value: val("before " + k), version: ver}
	}
	fd := e.follow(ctx, prefix)
	if fd == nil {
		return
	}
	defer fd.stop()
	_, iS := fd.initialSync(ctx, promiseFollowLost)
	if iS < 0 {
		return
	}
	// One write the live feed must carry before the break.
	live := prefix + "live.example"
	since[live] = time.Now()
	lv, ok := e.followPut(ctx, promiseFollowLost, live, driver.NoVersion, val("live"))
	if !ok {
		return
	}
	want[live] = &entry{value: val("live"), version: lv}
	ev, iL := fd.awaitSynced(ctx, promiseFollowOrder, iS+1, time.Now(), "a write before the break")
	if iL < 0 {
		return
	}
	broken := len(ev)
	if err := b.BreakFeed(ctx); err != nil {
		e.errorf(promiseFollowLost, "FeedBreaker.BreakFeed = %v", err)
		return
	}
	cut := time.Now()
	// The writes the gap must not swallow: a new key, a changed one, a
	// deleted one.
	gap := prefix + "gap.example"
	since[gap] = time.Now()
	gv, err := e.retryPut(ctx, gap, driver.NoVersion, val("written while the feed was cut"))
	if err != nil {
		e.errorf(promiseFollowLost, "creating %q after the break: %v", gap, err)
		return
	}
	want[gap] = &entry{value: val("written while the feed was cut"), version: gv}
	since[moved] = time.Now()
	mv, err := e.retryPut(ctx, moved, want[moved].version, val("moved while the feed was cut"))
	if err != nil {
		e.errorf(promiseFollowLost, "updating %q after the break: %v", moved, err)
		return
	}
	want[moved] = &entry{value: val("moved while the feed was cut"), version: mv}
	dv := want[doomed].version
	since[doomed] = time.Now()
	if err := e.retryDelete(ctx, doomed, dv); err != nil {
		e.errorf(promiseFollowLost, "deleting %q after the break: %v", doomed, err)
		return
	}
	want[doomed] = nil
	done := time.Now()
	ev, iA := fd.awaitSynced(ctx, promiseFollowLost, broken, done, "the writes made after the break returned")
	if iA < 0 {
		return
	}
	after := ev[broken : iA+1]
	when := fmt.Sprintf("at the first Synced (At %s) after the writes made %v after the break returned", ev[iA].At.Format("15:04:05.000000"), done.Sub(cut).Round(time.Millisecond))
	lost := slices.IndexFunc(after, func(a arrival) bool { return a.Kind == driver.ChangeLost })
	if lost < 0 {
		// No Lost: the feed must have resumed from where it was, every
		// change of the gap delivered in order.
		ok := e.compareSequence(promiseFollowLost, gap, []committed{{driver.ChangePut, gv, want[gap].value, since[gap]}}, changesOf(after, gap), false, "written while the feed was cut, resumed without Lost")
		ok = e.compareSequence(promiseFollowLost, moved, []committed{{driver.ChangePut, mv, want[moved].value, since[moved]}}, changesOf(after, moved), false, "updated while the feed was cut, resumed without Lost") && ok
		ok = e.compareSequence(promiseFollowLost, doomed, []committed{{driver.ChangeDelete, dv, nil, since[doomed]}}, changesOf(after, doomed), false, "deleted while the feed was cut, resumed without Lost") && ok
		if ok && e.compareMirror(promiseFollowLost, mirrorOf(ev[:iA+1]), want, since, when+", with no Lost (the feed resumed past a gap)") {
			e.logf("the feed said no Lost after the break and missed none of the %d writes made meanwhile: it resumed from its position (or its connection was not cut: does the follower dial through the harness's proxy?)", 3)
		}
		return
	}
	// Lost: then Reset, a snapshot and Synced before anything is decided.
	rest := after[lost:]
	iR := slices.IndexFunc(rest, func(a arrival) bool { return a.Kind == driver.ChangeReset })
	iSy := slices.IndexFunc(rest, func(a arrival) bool { return a.Kind == driver.ChangeSynced })
	switch {
	case iR < 0 || (iSy >= 0 && iSy < iR):
		e.errorf(promiseFollowLost, "after Lost (%s) the feed sent %s: no Reset and snapshot before the next Synced", rest[0], describeEvents(rest[1:]))
		return
	}
	e.compareMirror(promiseFollowLost, mirrorOf(ev[:iA+1]), want, since, when+", after the feed's Lost and resynchronisation")
	e.logf("the break was said as Lost (%v) %v after it, then Reset, a snapshot of %d key(s) and Synced", rest[0].Err, rest[0].at.Sub(cut).Round(time.Millisecond), snapshotSize(rest[iR:]))
}

func snapshotSize(ev []arrival) int {
	n := 0
	for _, a := range ev[1:] {
		if a.Kind != driver.ChangePut {
			break
		}
		n++
	}
	return n
}

// retryPut is a compare-and-swap made while the harness's connections
// were just cut: an error that is no conflict is retried after reading
// whether the write landed.
func (e *env) retryPut(ctx context.Context, key string, old driver.Version, value []byte) (driver.Version, error) {
	var last error
	for range 10 {
		ver, err := e.store.CompareAndSwap(ctx, key, old, value, ttl)
		if err == nil {
			return ver, nil
		}
		last = err
		if v, cur, gerr := e.store.Get(ctx, key); gerr == nil && cur != old && bytes.Equal(v, value) {
			return cur, nil // the lost answer's write landed
		}
		if errors.Is(err, driver.ErrConflict) {
			return 0, err
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return 0, err
		}
	}
	return 0, last
}

func (e *env) retryDelete(ctx context.Context, key string, ver driver.Version) error {
	var last error
	for range 10 {
		err := e.store.CompareAndDelete(ctx, key, ver)
		if err == nil {
			return nil
		}
		last = err
		if _, _, gerr := e.store.Get(ctx, key); errors.Is(gerr, driver.ErrNotFound) {
			return nil
		}
		if errors.Is(err, driver.ErrConflict) {
			return err
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return last
}

// checkFollowArgs calls Follow with a heartbeat of zero, one that is
// negative, and a nil fn: each must come back with an error of the
// adapter's own before the call's context ends (an adapter that ran with
// the argument would return only the context's error), deliver nothing,
// and not panic.
func checkFollowArgs(ctx context.Context, e *env) {
	f, ok := e.raw.(driver.Follower)
	if !ok {
		e.logf("not applicable: the store (%T) does not implement driver.Follower (optional)", e.raw)
		return
	}
	const prefix = "follow-arguments/"
	const bound = 10 * time.Second
	var delivered atomic.Int32
	count := func(driver.Change) { delivered.Add(1) }
	for _, c := range []struct {
		what      string
		heartbeat time.Duration
		fn        func(driver.Change)
	}{
		{"a heartbeat of 0", 0, count},
		{"a heartbeat of -1s", -time.Second, count},
		{"a nil fn", e.opts.FollowHeartbeat, nil},
	} {
		cctx, cancel := context.WithTimeout(ctx, bound)
		start := time.Now()
		done := make(chan error, 1)
		go func() {
			defer func() {
				if p := recover(); p != nil {
					e.errorf(promiseNoPanic, "Follow with %s panicked: %v", c.what, p)
					done <- fmt.Errorf("panic: %v", p)
				}
			}()
			done <- f.Follow(cctx, prefix, c.heartbeat, c.fn)
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(bound + followStopWait):
			cancel()
			e.errorf(promiseFollowArgs, "Follow with %s had not returned %v after it began, its context ended", c.what, bound+followStopWait)
			continue
		}
		took := time.Since(start)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			e.errorf(promiseFollowArgs, "Follow with %s returned nil after %v", c.what, took.Round(time.Millisecond))
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
			e.errorf(promiseFollowArgs, "Follow with %s ran until its context ended (%v after it began: %v) instead of refusing it", c.what, took.Round(time.Millisecond), err)
		default:
			e.logf("%s refused after %v: %v", c.what, took.Round(time.Millisecond), err)
		}
	}
	if n := delivered.Load(); n > 0 {
		e.errorf(promiseFollowArgs, "Follow delivered %d changes to a call it should have refused", n)
	}
}
