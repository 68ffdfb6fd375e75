package cloudflarekv

import (
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

func TestEscapeKeyRoundTrips(t *testing.T) {
	for _, k := range hostileKeys {
		seg := escapeKey("p:" + k)
		for _, c := range []byte(seg) {
			if c == '/' || c == '?' || c == '#' || c >= 0x80 || c == ' ' {
				t.Errorf("escapeKey(%q) = %q keeps %q", k, seg, c)
			}
		}
		if got, err := url.PathUnescape(seg); err != nil || got != "p:"+k {
			t.Errorf("PathUnescape(escapeKey(%q)) = %q, %v", k, got, err)
		}
	}
}

func TestPhysicalTTL(t *testing.T) {
	s := &Store{pad: 2*time.Second + granularity}
	for _, tc := range []struct {
		ttl  time.Duration
		want int64
	}{
		{time.Millisecond, 60},
		{56 * time.Second, 60},
		{57*time.Second + time.Millisecond, 61},
		{10 * time.Minute, 603},
		{10*time.Minute + time.Millisecond, 604},
	} {
		if got := s.physicalTTL(tc.ttl); got != tc.want {
			t.Errorf("physicalTTL(%v) = %d, want %d", tc.ttl, got, tc.want)
		}
		// Whatever whole second KV counts from, it keeps the entry until
		// ttl + 2·skew after the write.
		if got := time.Duration(s.physicalTTL(tc.ttl))*time.Second - granularity; got < tc.ttl+2*time.Second {
			t.Errorf("physicalTTL(%v) leaves %v after the worst rounding, less than ttl + 2 s", tc.ttl, got)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	at := func(v string) time.Duration {
		return retryAfter(&http.Response{Header: http.Header{"Retry-After": {v}}})
	}
	if got := at("3"); got != 3*time.Second {
		t.Errorf("Retry-After: 3 = %v", got)
	}
	if got := at(""); got != time.Second {
		t.Errorf("no Retry-After = %v, want the 1 s default", got)
	}
	if got := at("99999"); got != maxRetryAfter {
		t.Errorf("Retry-After: 99999 = %v, want the cap %v", got, maxRetryAfter)
	}
	if got := at(time.Now().Add(10 * time.Second).UTC().Format(http.TimeFormat)); got < 8*time.Second || got > 10*time.Second {
		t.Errorf("Retry-After as a date 10 s ahead = %v", got)
	}
}

func TestCombine(t *testing.T) {
	at := func(s int) time.Time { return time.UnixMilli(int64(s) * 1000).UTC() }
	rec := func(r record.Record) []byte { return record.EncodeRecord(r) }
	fails := func(s ...int) record.Record {
		var r record.Record
		for _, x := range s {
			r.Failures = append(r.Failures, at(x))
		}
		return r
	}
	now := at(100)
	live := now.Add(time.Minute)
	older := write{value: rec(fails(1)), ver: 10, base: 1, ttl: time.Minute, exp: live}
	// open is a half-open record that a Success deleted (version 20).
	open := record.Record{Failures: []time.Time{at(1), at(2)}, RestrainedUntil: at(160), Probing: true}
	deleted := write{del: true, ver: 21, base: 20, goneVer: 20, goneVal: rec(open)}
	for _, tc := range []struct {
		name   string
		older  write
		newer  write
		want   []byte // nil: want a delete
		wantOf driver.Version
	}{
		{"derived-replaces", older, write{value: rec(fails(2)), ver: 11, base: 10, exp: live}, rec(fails(2)), 11},
		{"concurrent-merges", older, write{value: rec(fails(2)), ver: 11, base: 1, exp: live}, rec(fails(1, 2)), 11},
		{"delete-replaces", older, write{del: true, ver: 11, base: 1}, nil, 11},
		{"write-replaces-delete", write{del: true, ver: 5}, write{value: rec(fails(3)), ver: 6, exp: live}, rec(fails(3)), 6},
		// An unanswered probe's record, expired, must not come back.
		{"expired-not-merged",
			write{value: rec(record.Record{Failures: []time.Time{at(1)}, RestrainedUntil: at(90), Probing: true}), ver: 10, base: 9, exp: now},
			write{value: rec(fails(99)), ver: 11, exp: live}, rec(fails(99)), 11},
		// A Failure computed from the record a Success deleted keeps
		// only its own failure instant.
		{"computed-from-deleted-rebased", deleted,
			write{value: rec(record.Record{Failures: []time.Time{at(1), at(2), at(3)}, RestrainedUntil: at(163)}), ver: 22, base: 20, exp: live},
			rec(fails(3)), 22},
		{"computed-from-deleted-adds-nothing", deleted,
			write{value: rec(record.Record{Failures: open.Failures, RestrainedUntil: at(200), Probing: true}), ver: 22, base: 20, exp: live},
			nil, 21},
		{"tombstone-carried-past-a-write",
			combine(deleted, write{value: rec(fails(50)), ver: 23, exp: live}, now),
			write{value: rec(record.Record{Failures: []time.Time{at(1), at(2), at(51)}, RestrainedUntil: at(163)}), ver: 24, base: 20, exp: live},
			rec(fails(50, 51)), 24},
		{"other-base-after-delete-replaces", deleted, write{value: rec(fails(7)), ver: 22, base: 0, exp: live}, rec(fails(7)), 22},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := combine(tc.older, tc.newer, now)
			if got.del != (tc.want == nil) || string(got.value) != string(tc.want) || got.ver != tc.wantOf {
				r, _ := record.DecodeRecord(got.value)
				w, _ := record.DecodeRecord(tc.want)
				t.Errorf("combine = %v %+v, want del=%v %+v version %d", got, r, tc.want == nil, w, tc.wantOf)
			}
		})
	}
}

func TestCacheLRU(t *testing.T) {
	now := time.Now()
	c := newCache(2)
	c.set("a", entry{present: true, ver: 1, at: now})
	c.set("b", entry{present: true, ver: 2, at: now})
	c.set("p", entry{present: true, ver: 3, pinned: true}) // pinned: not counted, never evicted
	c.get("a", now, time.Minute)                           // a is now the most recent
	c.set("c", entry{present: true, ver: 4, at: now})      // evicts b
	if _, ok := c.get("b", now, time.Minute); ok {
		t.Error("least recently used entry b was not evicted")
	}
	for _, k := range []string{"a", "c", "p"} {
		if _, ok := c.get(k, now, time.Minute); !ok {
			t.Errorf("entry %s was evicted", k)
		}
	}
	if n := c.len(); n != 3 {
		t.Errorf("cache holds %d entries, want 3 (2 + 1 pinned)", n)
	}
	if _, ok := c.get("a", now.Add(time.Minute), time.Minute); ok {
		t.Error("entry older than maxAge was served")
	}
	if _, ok := c.get("p", now.Add(time.Hour), time.Minute); !ok {
		t.Error("pinned entry not served because of its age")
	}
	c.unpin("p", 99, now) // another version: stays pinned
	c.unpin("p", 3, now.Add(time.Hour))
	c.set("d", entry{present: true, ver: 5, at: now.Add(time.Hour)})
	c.set("e", entry{present: true, ver: 6, at: now.Add(time.Hour)})
	var held []string
	for _, k := range []string{"a", "c", "p", "d", "e"} {
		if _, ok := c.get(k, now.Add(time.Hour), time.Minute); ok {
			held = append(held, k)
		}
	}
	if !slices.Equal(held, []string{"d", "e"}) {
		t.Errorf("after unpinning p and adding d, e: held %v, want [d e]", held)
	}
	zero := newCache(0)
	zero.set("x", entry{present: true, at: now})
	zero.set("y", entry{present: true, pinned: true})
	if _, ok := zero.get("x", now, time.Minute); ok {
		t.Error("a size-0 cache kept a read answer")
	}
	if _, ok := zero.get("y", now, time.Minute); !ok {
		t.Error("a size-0 cache dropped a queued write")
	}
}
