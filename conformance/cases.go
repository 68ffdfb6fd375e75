package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// cases is the suite's table, run in this order.
var cases []testCase

func init() {
	cases = []testCase{
		{id: caseReachable, promise: promiseReachable},
		{id: caseTraits, promise: promiseTraitsWellFormed, run: checkTraits},
		{id: caseGetAbsent, promise: promiseGetAbsent, run: checkGetAbsent},
		{id: caseCreateAndRead, promise: promiseCreate, run: checkCreateAndRead},
		{id: caseVersionsChange, promise: promiseNewVersion, run: checkVersionsChange},
		{id: caseCreateOnly, promise: promiseCreateOnly, atomic: true, run: checkCreateOnly},
		{id: caseStaleVersion, promise: promiseStaleConflicts, atomic: true, run: checkStaleVersion},
		{id: caseAbsentWithVersion, promise: promiseAbsentVersionConflicts, atomic: true, run: checkAbsentWithVersion},
		{id: caseCompareAndDelete, promise: promiseDelete, run: checkDelete},
		{id: caseCompareAndDeleteStale, promise: promiseDeleteStale, atomic: true, run: checkDeleteStale},
		{id: caseRecreate, promise: promiseNoVersionReuse, atomic: true, run: checkRecreate},
		{id: caseHostileKeys, promise: promiseKeys, run: checkHostileKeys},
		{id: caseContextEnded, promise: promiseContextEnded, run: checkContext},
		{id: caseForeign, promise: promiseForeign, run: checkForeign},
		{id: caseListPages, promise: promiseListAll, lister: true, run: checkListPages},
		{id: caseListKeys, promise: promiseListAll, lister: true, run: checkListKeys},
		{id: caseListExpired, promise: promiseListExpired, lister: true, slow: true, run: checkListExpired},
		{id: caseFollowArgs, promise: promiseFollowArgs, follower: true, run: checkFollowArgs},
		{id: caseFollowSnapshot, promise: promiseFollowSnapshot, follower: true, run: checkFollowSnapshot},
		{id: caseFollowOrder, promise: promiseFollowOrder, follower: true, run: checkFollowOrder},
		{id: caseFollowStorm, promise: promiseFollowMirror, follower: true, run: checkFollowStorm},
		{id: caseFollowHeartbeat, promise: promiseFollowHeartbeat, follower: true, waits: true, run: checkFollowHeartbeat},
		{id: caseFollowExpiry, promise: promiseFollowExpiry, follower: true, slow: true, run: checkFollowExpiry},
		{id: caseClockSampler, promise: promiseClockSampler, sampler: true, run: checkClockSampler},
		{id: caseReadStaleness, promise: promiseReadStaleness, run: checkStaleness},
		{id: caseLinearizable, promise: promiseLinearizable, atomic: true, run: checkLinearizable},
		{id: caseExpiry, promise: promiseExpiryWindow, slow: true, run: checkExpiry},
		{id: caseExpiredAbsent, promise: promiseExpiredCAS, slow: true, run: checkExpiredAbsent},
		{id: caseStateTTL, promise: promiseStateTTL, waits: true, run: checkStateTTL},
		{id: caseReplaceTTL, promise: promiseReplaceTTL, waits: true, run: checkReplaceTTL},
		{id: caseOffGrid, promise: promiseOffGrid, waits: true, run: checkOffGrid},
		{id: caseSkewedReader, promise: promiseSkewedReader, waits: true, run: checkSkewedReader},
		{id: caseFleet, promise: promiseFleet, run: checkFleet},
		{id: caseMargin, promise: promiseMargin, kind: kindDeclaration, run: checkMargin},
		{id: caseLostCAS, promise: promiseLostCAS, atomic: true, alone: true, run: checkLostCAS},
		{id: caseLostDelete, promise: promiseLostDelete, atomic: true, alone: true, run: checkLostDelete},
		{id: caseLostBreaker, promise: promiseLostFailure, alone: true, run: checkLostFailure},
		{id: caseFollowLost, promise: promiseFollowLost, follower: true, alone: true, run: checkFollowLost},
		{id: caseFollowWipe, promise: promiseFollowWipe, follower: true, alone: true, run: checkFollowWipe},
	}
}

// ttl is the TTL contract cases write with: long enough never to expire
// during a case.
const ttl = 10 * time.Minute

func val(s string) []byte { return []byte(s) }

func checkTraits(_ context.Context, e *env) {
	t := e.traits
	m := t.Expiry
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Expiry.Granularity", m.Granularity}, {"Expiry.MinTTL", m.MinTTL}, {"Expiry.Early", m.Early}, {"Expiry.Late", m.Late},
		{"ReadStaleness", t.ReadStaleness}, {"MinWriteInterval", t.MinWriteInterval}} {
		if d.v < 0 {
			e.errorf(promiseTraitsWellFormed, "%s is %v", d.name, d.v)
		}
	}
	if m.Kind != driver.ExpiryRelative && m.Kind != driver.ExpiryReaderFiltered {
		e.errorf(promiseTraitsWellFormed, "Expiry.Kind is %v", m.Kind)
	}
	// The suite reads the traits once, from the first store, and holds
	// every store of the harness to them: the same store asked again, and
	// a second store of the same harness, must declare the same.
	if again := e.raw.Traits(); again != t {
		e.errorf(promiseTraitsStable, "Traits changed between two calls on one store: %+v then %+v", t, again)
	}
	s2, err := e.r.makeStore(e.ctx)
	if err != nil {
		e.errorf(promiseMakeStore, "MakeStore for a second store: %v", err)
		return
	}
	if other := s2.Traits(); other != t {
		e.errorf(promiseTraitsStable, "a second store of the harness declares %+v, the first %+v", other, t)
	}
}

func checkGetAbsent(ctx context.Context, e *env) {
	v, ver, err := e.store.Get(ctx, "absent.example")
	if !errors.Is(err, driver.ErrNotFound) {
		e.errorf(promiseGetAbsent, "Get(%q), a key never written, returned value %q, version %d, error %v; want an error matching driver.ErrNotFound", "absent.example", v, ver, err)
	}
}

// create writes key with value if absent, reporting a violation of
// "create" on failure.
func (e *env) create(ctx context.Context, key string, value []byte, ttl time.Duration) (driver.Version, bool) {
	ver, err := e.store.CompareAndSwap(ctx, key, driver.NoVersion, value, ttl)
	switch {
	case err != nil:
		e.fatalf(promiseCreate, "CompareAndSwap(%q, NoVersion) = %v", key, err)
		return 0, false
	case ver == driver.NoVersion:
		e.fatalf(promiseCreate, "CompareAndSwap(%q, NoVersion) returned driver.NoVersion", key)
		return 0, false
	}
	return ver, true
}

// awaitRead polls Get(key) for up to the declared ReadStaleness until it
// returns version want (or, with want == NoVersion, ErrNotFound) with
// wantValue (nil: any value), and
// reports a violation of promise otherwise. It returns the last answer and
// how long the write stayed invisible.
func (e *env) awaitRead(ctx context.Context, promise PromiseID, key string, want driver.Version, wantValue []byte) ([]byte, driver.Version, time.Duration, bool) {
	start := time.Now()
	deadline := start.Add(e.traits.ReadStaleness)
	for first := true; ; first = false {
		// A read issued within the window may be stale even if its answer
		// arrives after it (a loaded machine): only one issued past the
		// deadline breaks the promise.
		issued := time.Now()
		v, ver, err := e.store.Get(ctx, key)
		// Visible on the first read: not stale at all.
		var seen time.Duration
		if !first {
			seen = time.Since(start)
		}
		switch {
		case want == driver.NoVersion && errors.Is(err, driver.ErrNotFound):
			return nil, driver.NoVersion, seen, true
		case want != driver.NoVersion && err == nil && ver == want:
			if wantValue != nil && !bytes.Equal(v, wantValue) {
				e.errorf(promise, "Get(%q) returned version %d with value %q, but that version was written with %q", key, ver, v, wantValue)
				return v, ver, seen, false
			}
			return v, ver, seen, true
		case err != nil && !errors.Is(err, driver.ErrNotFound):
			e.errorf(promise, "Get(%q) = %v", key, err)
			return nil, 0, seen, false
		}
		if issued.After(deadline) || ctx.Err() != nil {
			if want == driver.NoVersion {
				e.errorf(promise, "Get(%q) still returns version %d (%q) %v after it was deleted (declared ReadStaleness %v)", key, ver, v, seen.Round(time.Millisecond), e.traits.ReadStaleness)
			} else {
				e.errorf(promise, "Get(%q) returns version %d (%q, err %v) %v after version %d was written (declared ReadStaleness %v)", key, ver, v, err, seen.Round(time.Millisecond), want, e.traits.ReadStaleness)
			}
			return v, ver, seen, false
		}
		_ = sleep(ctx, min(50*time.Millisecond, e.traits.ReadStaleness/20+time.Millisecond))
	}
}

func checkCreateAndRead(ctx context.Context, e *env) {
	const key = "create.example"
	ver, ok := e.create(ctx, key, val("one"), ttl)
	if !ok {
		return
	}
	e.awaitRead(ctx, promiseRead, key, ver, val("one"))
	// An empty value is a value, not an absence.
	ver2, err := e.store.CompareAndSwap(ctx, "empty.example", driver.NoVersion, []byte{}, ttl)
	if err != nil {
		e.errorf(promiseCreate, "CompareAndSwap(empty.example, NoVersion, empty value) = %v", err)
		return
	}
	e.awaitRead(ctx, promiseRead, "empty.example", ver2, []byte{})
}

func checkVersionsChange(ctx context.Context, e *env) {
	const key = "versions.example"
	ver, ok := e.create(ctx, key, val("same"), ttl)
	if !ok {
		return
	}
	seen := map[driver.Version]int{ver: 0}
	for i := 1; i <= 4; i++ {
		// The same bytes each time: the version must change anyway.
		next, err := e.store.CompareAndSwap(ctx, key, ver, val("same"), ttl)
		if err != nil {
			e.errorf(promiseNewVersion, "write %d: CompareAndSwap(%q, %d) with the current version = %v", i, key, ver, err)
			return
		}
		if next == driver.NoVersion {
			e.errorf(promiseNewVersion, "write %d returned driver.NoVersion", i)
			return
		}
		if j, dup := seen[next]; dup {
			e.errorf(promiseNewVersion, "write %d returned version %d, already returned by write %d", i, next, j)
		}
		seen[next] = i
		ver = next
		if _, _, _, ok := e.awaitRead(ctx, promiseRead, key, ver, val("same")); !ok {
			return
		}
	}
}

func checkCreateOnly(ctx context.Context, e *env) {
	const key = "create-only.example"
	ver, ok := e.create(ctx, key, val("first"), ttl)
	if !ok {
		return
	}
	got, err := e.store.CompareAndSwap(ctx, key, driver.NoVersion, val("second"), ttl)
	if !errors.Is(err, driver.ErrConflict) {
		e.errorf(promiseCreateOnly, "second CompareAndSwap(%q, NoVersion) = %d, %v", key, got, err)
	}
	e.checkConflict(err, key, ver, val("first"))
	e.awaitRead(ctx, promiseStaleConflicts, key, ver, val("first"))
}

// checkConflict checks that a *driver.ConflictError, if err is one, carries
// the real current value and version.
func (e *env) checkConflict(err error, key string, ver driver.Version, value []byte) {
	ce, ok := errors.AsType[*driver.ConflictError](err)
	if !ok {
		return
	}
	if !errors.Is(err, driver.ErrConflict) {
		e.errorf(promiseConflictValue, "%q: the *driver.ConflictError does not match driver.ErrConflict", key)
	}
	if ce.Version != ver || (ver != driver.NoVersion && !bytes.Equal(ce.Value, value)) {
		e.errorf(promiseConflictValue, "%q: conflict reported version %d value %q, but the key holds version %d value %q", key, ce.Version, ce.Value, ver, value)
	}
}

func checkStaleVersion(ctx context.Context, e *env) {
	const key = "stale.example"
	v1, ok := e.create(ctx, key, val("v1"), ttl)
	if !ok {
		return
	}
	v2, err := e.store.CompareAndSwap(ctx, key, v1, val("v2"), ttl)
	if err != nil {
		e.errorf(promiseStaleConflicts, "CompareAndSwap(%q, %d) with the current version = %v", key, v1, err)
		return
	}
	got, err := e.store.CompareAndSwap(ctx, key, v1, val("v3"), ttl)
	if !errors.Is(err, driver.ErrConflict) {
		e.errorf(promiseStaleConflicts, "CompareAndSwap(%q, %d) after the key moved to version %d = %d, %v", key, v1, v2, got, err)
	}
	e.checkConflict(err, key, v2, val("v2"))
	e.awaitRead(ctx, promiseStaleConflicts, key, v2, val("v2"))
	// A version the store never handed out conflicts too.
	bogus := v2 + 1000003
	if bogus == v1 {
		bogus++
	}
	if _, err := e.store.CompareAndSwap(ctx, key, bogus, val("v4"), ttl); !errors.Is(err, driver.ErrConflict) {
		e.errorf(promiseStaleConflicts, "CompareAndSwap(%q, %d) with a version never written = %v", key, bogus, err)
	}
}

func checkAbsentWithVersion(ctx context.Context, e *env) {
	const key = "absent-with-version.example"
	_, err := e.store.CompareAndSwap(ctx, key, 42, val("x"), ttl)
	if !errors.Is(err, driver.ErrConflict) {
		e.errorf(promiseAbsentVersionConflicts, "CompareAndSwap(%q, 42) on an absent key = %v", key, err)
	}
	e.checkConflict(err, key, driver.NoVersion, nil)
	e.awaitRead(ctx, promiseAbsentVersionConflicts, key, driver.NoVersion, nil)
}

func checkDelete(ctx context.Context, e *env) {
	const key = "delete.example"
	ver, ok := e.create(ctx, key, val("doomed"), ttl)
	if !ok {
		return
	}
	if _, _, _, ok := e.awaitRead(ctx, promiseRead, key, ver, val("doomed")); !ok {
		return
	}
	if err := e.store.CompareAndDelete(ctx, key, ver); err != nil {
		e.errorf(promiseDelete, "CompareAndDelete(%q, %d) with the current version = %v", key, ver, err)
		return
	}
	if _, _, _, ok := e.awaitRead(ctx, promiseDelete, key, driver.NoVersion, nil); !ok {
		return
	}
	if err := e.store.CompareAndDelete(ctx, key, ver); !errors.Is(err, driver.ErrNotFound) {
		e.errorf(promiseDeleteAbsent, "second CompareAndDelete(%q, %d) = %v", key, ver, err)
	}
	if err := e.store.CompareAndDelete(ctx, "never-written.example", driver.NoVersion); !errors.Is(err, driver.ErrNotFound) {
		e.errorf(promiseDeleteAbsent, "CompareAndDelete(never-written.example, NoVersion) = %v", err)
	}
	// Deleted means absent for create-only too.
	if _, err := e.store.CompareAndSwap(ctx, key, driver.NoVersion, val("again"), ttl); err != nil {
		e.errorf(promiseCreate, "CompareAndSwap(%q, NoVersion) after a delete = %v", key, err)
	}
}

func checkDeleteStale(ctx context.Context, e *env) {
	const key = "delete-stale.example"
	v1, ok := e.create(ctx, key, val("v1"), ttl)
	if !ok {
		return
	}
	v2, err := e.store.CompareAndSwap(ctx, key, v1, val("v2"), ttl)
	if err != nil {
		e.errorf(promiseStaleConflicts, "CompareAndSwap(%q, %d) with the current version = %v", key, v1, err)
		return
	}
	err = e.store.CompareAndDelete(ctx, key, v1)
	if !errors.Is(err, driver.ErrConflict) {
		e.errorf(promiseDeleteStale, "CompareAndDelete(%q, %d) after the key moved to version %d = %v", key, v1, v2, err)
	}
	e.checkConflict(err, key, v2, val("v2"))
	e.awaitRead(ctx, promiseDeleteStale, key, v2, val("v2"))
}

func checkRecreate(ctx context.Context, e *env) {
	const key = "recreate.example"
	seen := map[driver.Version]bool{}
	for i := range 3 {
		ver, ok := e.create(ctx, key, val("same"), ttl)
		if !ok {
			return
		}
		if seen[ver] {
			e.errorf(promiseNoVersionReuse, "creation %d of %q returned version %d again: a worker holding the old version could overwrite the new record", i+1, key, ver)
		}
		seen[ver] = true
		if err := e.store.CompareAndDelete(ctx, key, ver); err != nil {
			e.errorf(promiseDelete, "CompareAndDelete(%q, %d) = %v", key, ver, err)
			return
		}
	}
}

// hostileKeys are keys an adapter must escape, not mangle: escaping
// collisions ("a/b" vs "a%2Fb", "a b" vs "a+b"), path tricks, case, and
// the longest keys driver.ValidateKey accepts.
func hostileKeys() []string {
	keys := []string{
		"a/b", "a%2Fb", "a%2fb", "a b", "a+b", "a%20b", "a#b", "a?b", "a?b=c&d", "a\\b",
		"..", ".", "../x", "./x", "a/../b", "/leading", "trailing/", "//",
		"Host.Example", "host.example", "xn--bcher-kva.example", "bücher.example", "日本語.jp", "🦀.example",
		"[::1]:8080", "example.com:8080", "*", "~user", "a%", "%", "'quote\"",
		strings.Repeat("k", driver.MaxKeyLen),
		strings.Repeat("k", driver.MaxKeyLen-1) + "j",
		strings.Repeat("é", driver.MaxKeyLen/2), // 2-byte runes, 256 bytes
		strings.Repeat("🦀", driver.MaxKeyLen/4), // 4-byte runes, 256 bytes
	}
	return keys
}

func checkHostileKeys(ctx context.Context, e *env) {
	keys := hostileKeys()
	vers := make([]driver.Version, len(keys))
	for i, k := range keys {
		if err := driver.ValidateKey(k); err != nil {
			// Breaker would never pass it: not the store's problem.
			e.logf("skipping %q: %v", k, err)
			continue
		}
		ver, err := e.store.CompareAndSwap(ctx, k, driver.NoVersion, val(fmt.Sprintf("value %d", i)), ttl)
		if err != nil {
			e.errorf(promiseKeys, "CompareAndSwap(%q, NoVersion) = %v (another key may have collided with it)", k, err)
			continue
		}
		vers[i] = ver
	}
	for i, k := range keys {
		if vers[i] == driver.NoVersion {
			continue
		}
		e.awaitRead(ctx, promiseKeys, k, vers[i], val(fmt.Sprintf("value %d", i)))
	}
	// Deleting one key must leave its look-alikes in place.
	for i, k := range keys[:2] {
		if vers[i] == driver.NoVersion {
			continue
		}
		if err := e.store.CompareAndDelete(ctx, k, vers[i]); err != nil {
			e.errorf(promiseKeys, "CompareAndDelete(%q, %d) = %v", k, vers[i], err)
		}
	}
	for i, k := range keys[2:4] {
		j := i + 2
		if vers[j] == driver.NoVersion {
			continue
		}
		e.awaitRead(ctx, promiseKeys, k, vers[j], val(fmt.Sprintf("value %d", j)))
	}
}

func checkContext(ctx context.Context, e *env) {
	const key = "context.example"
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	expired, cancel2 := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{{"canceled", canceled, context.Canceled}, {"past deadline", expired, context.DeadlineExceeded}} {
		if _, _, err := e.store.Get(c.ctx, key); !errors.Is(err, c.want) {
			e.errorf(promiseContextEnded, "Get with a %s context = %v, want an error matching %v", c.name, err, c.want)
		}
		if _, err := e.store.CompareAndSwap(c.ctx, key, driver.NoVersion, val("x"), ttl); !errors.Is(err, c.want) {
			e.errorf(promiseContextEnded, "CompareAndSwap with a %s context = %v, want an error matching %v", c.name, err, c.want)
		}
		if err := e.store.CompareAndDelete(c.ctx, key, 1); !errors.Is(err, c.want) {
			e.errorf(promiseContextEnded, "CompareAndDelete with a %s context = %v, want an error matching %v", c.name, err, c.want)
		}
	}
	if v, ver, err := e.store.Get(ctx, key); !errors.Is(err, driver.ErrNotFound) {
		e.errorf(promiseContextEnded, "a CompareAndSwap with an ended context wrote anyway: Get(%q) = %q, %d, %v", key, v, ver, err)
	}
}

// checkStaleness measures how long a completed write stays invisible to Get,
// after the reader has just read the previous version (a cache's worst case).
func checkStaleness(ctx context.Context, e *env) {
	const key = "staleness.example"
	ver, ok := e.create(ctx, key, val("v0"), ttl)
	if !ok {
		return
	}
	if _, _, _, ok := e.awaitRead(ctx, promiseReadStaleness, key, ver, val("v0")); !ok {
		return
	}
	var worst time.Duration
	for i := 1; i <= 3; i++ {
		// Read the current version right before overwriting it.
		if _, _, err := e.store.Get(ctx, key); err != nil {
			e.errorf(promiseReadStaleness, "Get(%q) = %v", key, err)
			return
		}
		value := val(fmt.Sprintf("v%d", i))
		next, err := e.store.CompareAndSwap(ctx, key, ver, value, ttl)
		if err != nil {
			e.errorf(promiseReadStaleness, "CompareAndSwap(%q, %d) with the current version = %v", key, ver, err)
			return
		}
		ver = next
		_, _, seen, ok := e.awaitRead(ctx, promiseReadStaleness, key, ver, value)
		worst = max(worst, seen)
		if !ok {
			break
		}
	}
	e.rep.setStaleness(worst)
	e.logf("a write stayed invisible to Get for up to %v (declared ReadStaleness %v)", worst.Round(time.Millisecond), e.traits.ReadStaleness)
}
