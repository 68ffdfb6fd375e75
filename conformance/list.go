package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// The Lister cases hold driver.Lister to what `kvbreaker list` relies on and
// gocloud's drivertest asks of a blob listing: across pages every live key
// under the prefix, even while keys are written between pages;
// no key outside the prefix, deleted or expired; no page over its limit;
// keys as written, byte for byte. They ask nothing about order (the doc
// says "in the store's order": Redis's SCAN has none), duplicates (SCAN
// repeats a key when its table is rehashed during the listing; they are
// noted in the report) nor a limit below 1.

// listPagesKeys is how many keys the pagination case lists: enough pages at
// a small limit that a store losing a key per page boundary loses dozens.
const listPagesKeys = 200

// maxListPages bounds one listing: a store whose Scan examines the shared
// table's every item (DynamoDB) may answer many empty pages before the end,
// but not this many.
const maxListPages = 100_000

// lister returns the case's store as a driver.Lister, or nil after noting
// that the case does not apply. A store may implement List and answer
// errors.ErrUnsupported (kvbreaker.Prefixed over a store that cannot
// enumerate): not applicable either.
func (e *env) lister(ctx context.Context) driver.Lister {
	l, ok := e.raw.(driver.Lister)
	if !ok {
		e.logf("not applicable: the store (%T) does not implement driver.Lister (optional)", e.raw)
		return nil
	}
	if _, _, err := l.List(ctx, "absent-prefix/", "", 1); errors.Is(err, errors.ErrUnsupported) {
		e.logf("not applicable: the store's List answers %v", err)
		return nil
	}
	return l
}

// flush sends a queuing store's writes (driver.Flusher), which its List
// need not show before.
func (e *env) flush(ctx context.Context, promise PromiseID) bool {
	if f, ok := e.raw.(driver.Flusher); ok {
		if err := f.Flush(ctx); err != nil {
			e.errorf(promise, "Flush before listing = %v", err)
			return false
		}
	}
	return true
}

// listSpec is one listing a case checks: every key of want must be listed,
// keys of may may be, nothing else.
type listSpec struct {
	prefix string
	limit  int
	want   []string
	may    []string
	// between is called after each page but the last, to write while the
	// listing runs.
	between func(ctx context.Context, page int)
	what    string
}

// listAll pages through l. It reports pages over the limit and listings
// that do not end, and returns every key in the order listed.
func (e *env) listAll(ctx context.Context, l driver.Lister, s listSpec) ([]string, bool) {
	var keys []string
	cursors := map[string]bool{}
	cursor := ""
	for page := 0; ; page++ {
		got, next, err := l.List(ctx, s.prefix, cursor, s.limit)
		if err != nil {
			e.errorf(promiseListAll, "List(%q, cursor %q, %d) on page %d%s = %v", s.prefix, cursor, s.limit, page+1, s.what, err)
			return keys, false
		}
		if len(got) > s.limit {
			e.errorf(promiseListLimit, "List(%q, cursor %q, %d) returned %d keys on page %d%s", s.prefix, cursor, s.limit, len(got), page+1, s.what)
			return keys, false
		}
		keys = append(keys, got...)
		if next == "" {
			return keys, true
		}
		if cursors[next] || next == cursor {
			e.errorf(promiseListLimit, "List(%q, …, %d) returned the cursor %q a second time on page %d%s: the listing does not end", s.prefix, s.limit, next, page+1, s.what)
			return keys, false
		}
		if page >= maxListPages {
			e.errorf(promiseListLimit, "List(%q, …, %d) has not ended after %d pages%s", s.prefix, s.limit, page+1, s.what)
			return keys, false
		}
		cursors[next] = true
		cursor = next
		if s.between != nil {
			s.between(ctx, page)
		}
		if ctx.Err() != nil {
			e.errorf(promiseListAll, "the case's deadline passed during the listing%s: %v", s.what, ctx.Err())
			return keys, false
		}
	}
}

// checkListing lists s once (again, while keys it wants may not be visible
// yet within the declared ReadStaleness after written) and reports keys
// missed, listed twice, or not allowed.
func (e *env) checkListing(ctx context.Context, l driver.Lister, s listSpec, written time.Time) {
	for attempt := 0; ; attempt++ {
		if !e.flush(ctx, promiseListAll) {
			return
		}
		issued := time.Now()
		keys, ok := e.listAll(ctx, l, s)
		if !ok {
			return
		}
		s.between = nil // writes only during the first listing
		missing := e.judgeListing(keys, s)
		if len(missing) == 0 {
			return
		}
		if issued.Before(written.Add(e.traits.ReadStaleness)) && ctx.Err() == nil {
			_ = sleep(ctx, min(50*time.Millisecond, e.traits.ReadStaleness/20+time.Millisecond))
			continue
		}
		e.errorf(promiseListAll, "List(%q) by pages of %d%s missed %d of the %d live keys under the prefix (%s)%s",
			s.prefix, s.limit, s.what, len(missing), len(s.want), sample(missing), staleNote(attempt, e.traits.ReadStaleness))
		return
	}
}

func staleNote(attempts int, staleness time.Duration) string {
	if attempts == 0 {
		return ""
	}
	return fmt.Sprintf("; listed again %d time(s) over the declared ReadStaleness %v", attempts, staleness)
}

// judgeListing reports duplicates and keys not allowed, and returns the
// wanted keys missing.
func (e *env) judgeListing(keys []string, s listSpec) []string {
	count := make(map[string]int, len(keys))
	for _, k := range keys {
		count[k]++
	}
	var dup, outside, other []string
	for _, k := range keys {
		n := count[k]
		if n == 0 {
			continue // reported already
		}
		count[k] = 0
		if n > 1 {
			dup = append(dup, fmt.Sprintf("%q ×%d", k, n))
		}
		switch {
		case !strings.HasPrefix(k, s.prefix):
			outside = append(outside, k)
		case !slices.Contains(s.want, k) && !slices.Contains(s.may, k):
			other = append(other, k)
		}
	}
	if len(dup) > 0 {
		// Not a violation: driver.Lister does not promise each key once,
		// and Redis's SCAN repeats keys when its table is rehashed
		// during a listing.
		e.logf("List(%q) by pages of %d%s listed %d key(s) more than once: %s", s.prefix, s.limit, s.what, len(dup), sampleRaw(dup))
	}
	if len(outside) > 0 {
		e.errorf(promiseListPrefix, "List(%q) by pages of %d%s listed %d key(s) that do not begin with the prefix: %s", s.prefix, s.limit, s.what, len(outside), sample(outside))
	}
	if len(other) > 0 {
		e.errorf(promiseListPrefix, "List(%q) by pages of %d%s listed %d key(s) that are not live under it (deleted, or never written as listed: mangled?): %s", s.prefix, s.limit, s.what, len(other), sample(other))
	}
	var missing []string
	for _, k := range s.want {
		if _, listed := count[k]; !listed {
			missing = append(missing, k)
		}
	}
	return missing
}

// sample quotes the first few of keys.
func sample(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%.40q", k) // runes, not bytes: a 256-byte key reads as its start
	}
	return sampleRaw(q)
}

func sampleRaw(items []string) string {
	const n = 5
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + fmt.Sprintf(", … %d more", len(items)-n)
}

// under returns the keys of keys that begin with prefix.
func under(keys []string, prefix string) []string {
	var out []string
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

// checkListPages writes listPagesKeys keys under "list/", keys just outside
// it, and a deleted one, then lists them by small pages while writing new
// keys between pages (sorting first, where a store resuming by a count of
// keys already returned would skip), and again whole, by one page, and
// under a narrower prefix.
func checkListPages(ctx context.Context, e *env) {
	l := e.lister(ctx)
	if l == nil {
		return
	}
	const prefix = "list/"
	var keys []string
	for i := range listPagesKeys {
		keys = append(keys, fmt.Sprintf("%sh%03d.example", prefix, i))
	}
	// The prefix itself is under it; the others are next to it on either
	// side, in byte order and by case.
	keys = append(keys, prefix)
	outside := []string{"list", "lisT/h.example", "list.example", "list0.example", "lisu/h.example", "a.example", "z.example", "LIST/h.example"}
	for _, k := range append(slices.Clone(keys), outside...) {
		if _, ok := e.create(ctx, k, val("listed"), ttl); !ok {
			return
		}
	}
	deleted := prefix + "h050-deleted.example"
	ver, ok := e.create(ctx, deleted, val("deleted"), ttl)
	if !ok {
		return
	}
	if err := e.store.CompareAndDelete(ctx, deleted, ver); err != nil {
		e.errorf(promiseDelete, "CompareAndDelete(%q, %d) = %v", deleted, ver, err)
		return
	}
	written := time.Now()

	// Writes between pages: each sorts before every key listed so far.
	// They may or may not be listed.
	betweenKey := func(page int) string { return fmt.Sprintf("%sa%03d.example", prefix, page) }
	var may, during []string
	for i := range listPagesKeys + 2 {
		may = append(may, betweenKey(i))
	}
	between := func(ctx context.Context, page int) {
		k := betweenKey(page)
		if _, err := e.store.CompareAndSwap(ctx, k, driver.NoVersion, val("between pages"), ttl); err != nil {
			e.errorf(promiseCreate, "CompareAndSwap(%q, NoVersion) between pages = %v", k, err)
			return
		}
		during = append(during, k)
	}
	e.checkListing(ctx, l, listSpec{prefix: prefix, limit: 7, want: keys, may: may, between: between, what: ", with a key written between pages"}, written)
	keys = append(keys, during...)
	written = time.Now()
	all := append(slices.Clone(keys), outside...)
	for _, s := range []listSpec{
		{prefix: prefix, limit: 1000, want: keys},
		{prefix: "", limit: 50, want: all},
		{prefix: prefix + "h1", limit: 3, want: under(keys, prefix+"h1")},
		{prefix: prefix + "h05", limit: 1, want: under(keys, prefix+"h05")},
		{prefix: prefix + "h2", limit: 4, want: nil},
	} {
		e.checkListing(ctx, l, s, written)
	}
	e.logf("listed %d keys under %q by pages of 7 with %d keys written between pages, then by 1000, the whole store by 50, and three narrower prefixes", listPagesKeys+1, prefix, len(during))
}

// listPrefixes are the prefixes the hostile-keys listing checks: escaping
// metacharacters (SQL LIKE, glob, '%' and '/'), multi-byte runes, and the
// largest code point, whose keys an upper bound of prefix+U+10FFFF misses.
var listPrefixes = []string{"", "a", "a%", "a/", "a?", "a\\", "..", "%", "*", "[", "bücher", "日本", "🦀", "\U0010FFFF", "p\U0010FFFF", "p", "k", "d\uD7FF", "d"}

// listKeys are the hostile keys, keys next to the largest code point and
// to the surrogate gap (U+D7FF, U+E000), and SQL LIKE's metacharacters.
func listKeys() []string {
	const top = "\U0010FFFF"
	keys := append(hostileKeys(), "p", "px", "p"+top, "p"+top+"x", "p"+top+top, top, top+"z", top+top, "q", "o"+top, "a%_x", "a_", "a[b]", "a*", `a\\`,
		"d\uD7FF", "d\uD7FFx", "d\uE000")
	var out []string
	for _, k := range keys {
		if driver.ValidateKey(k) == nil && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// checkListKeys writes keys with odd bytes to a store of their own and
// lists them under prefixes that need escaping or bounding.
func checkListKeys(ctx context.Context, e *env) {
	l := e.lister(ctx)
	if l == nil {
		return
	}
	keys := listKeys()
	for _, k := range keys {
		if _, ok := e.create(ctx, k, val("odd"), ttl); !ok {
			return
		}
	}
	written := time.Now()
	for _, p := range listPrefixes {
		limit := 1000
		if p == "" {
			limit = 3
		}
		e.checkListing(ctx, l, listSpec{prefix: p, limit: limit, want: under(keys, p)}, written)
	}
	e.logf("listed %d keys with odd bytes under %d prefixes", len(keys), len(listPrefixes))
}

// checkListExpired lets an entry expire among live ones (in real time, or
// on the harness's clock) and checks that List leaves it out once Get
// finds it absent, whether or not the backend has deleted it yet.
func checkListExpired(ctx context.Context, e *env) {
	l := e.lister(ctx)
	if l == nil {
		return
	}
	const prefix = "list-expired/"
	live := []string{prefix + "a.example", prefix + "m.example", prefix + "z.example"}
	// Live for as long as the expiring entry may take to go, and more.
	_, _, hi := e.windowFor(e.opts.ExpiryTTL)
	for _, k := range live {
		if _, ok := e.create(ctx, k, val("live"), max(ttl, 2*hi+time.Minute)); !ok {
			return
		}
	}
	gone := prefix + "gone.example"
	if _, _, ok := e.measure(ctx, expiring{key: gone, ttl: e.opts.ExpiryTTL}); !ok {
		return
	}
	if !e.flush(ctx, promiseListExpired) {
		return
	}
	for _, limit := range []int{1, 1000} {
		keys, ok := e.listAll(ctx, l, listSpec{prefix: prefix, limit: limit})
		if !ok {
			return
		}
		if slices.Contains(keys, gone) {
			e.errorf(promiseListExpired, "List(%q) by pages of %d listed %q, which Get finds absent: it expired (TTL %v)", prefix, limit, gone, e.opts.ExpiryTTL)
		}
		e.judgeListing(keys, listSpec{prefix: prefix, limit: limit, want: live, may: []string{gone}})
		for _, k := range live {
			if !slices.Contains(keys, k) {
				e.errorf(promiseListAll, "List(%q) by pages of %d missed the live key %q beside an expired one", prefix, limit, k)
			}
		}
	}
}
