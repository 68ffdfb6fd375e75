package record

import (
	"testing"
	"time"
)

// TestMergeRecords: two records written concurrently to a last-writer-wins
// store merge into one that loses no failure and no restraint (moved here
// from backends/cloudflarekv, which calls it through adapter.MergeRecords).
func TestMergeRecords(t *testing.T) {
	t0 := time.UnixMilli(1_800_000_000_000).UTC()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name         string
		older, newer Record
		want         Record
	}{
		{
			name:  "failure-instants-union",
			older: Record{Failures: []time.Time{at(1), at(3)}},
			newer: Record{Failures: []time.Time{at(2), at(3)}},
			want:  Record{Failures: []time.Time{at(1), at(2), at(3)}},
		},
		{
			name:  "later-restraint-and-probing-kept",
			older: Record{Failures: []time.Time{at(1)}, RestrainedUntil: at(100), Probing: true},
			newer: Record{Failures: []time.Time{at(2)}, RestrainedUntil: at(50)},
			want:  Record{Failures: []time.Time{at(1), at(2)}, RestrainedUntil: at(100), Probing: true},
		},
		{
			name:  "closed-and-open",
			older: Record{Failures: []time.Time{at(5)}, RestrainedUntil: at(60)},
			newer: Record{Failures: []time.Time{at(6)}},
			want:  Record{Failures: []time.Time{at(5), at(6)}, RestrainedUntil: at(60)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Merge(EncodeRecord(tc.older), EncodeRecord(tc.newer))
			if want := EncodeRecord(tc.want); string(got) != string(want) {
				r, _ := DecodeRecord(got)
				t.Errorf("merge = %+v, want %+v", r, tc.want)
			}
		})
	}
	if got := Merge([]byte("not a record"), []byte("newer")); string(got) != "newer" {
		t.Errorf("merging an undecodable record = %q, want the newer value", got)
	}
}

// TestRebaseOnDelete: a record computed from one since deleted keeps only
// the failures the deleted record did not have, without its restraint or
// probe; nothing left means no record; a value that is not a record stays.
func TestRebaseOnDelete(t *testing.T) {
	t0 := time.UnixMilli(1_800_000_000_000).UTC()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	gone := EncodeRecord(Record{Failures: []time.Time{at(1), at(2)}, RestrainedUntil: at(60), Probing: true})
	got, ok := RebaseOnDelete(EncodeRecord(Record{Failures: []time.Time{at(1), at(2), at(3)}, RestrainedUntil: at(90), Probing: true}), gone)
	if want := EncodeRecord(Record{Failures: []time.Time{at(3)}}); !ok || string(got) != string(want) {
		r, _ := DecodeRecord(got)
		t.Errorf("rebase = %+v, %v; want only the new failure, closed", r, ok)
	}
	if _, ok := RebaseOnDelete(EncodeRecord(Record{Failures: []time.Time{at(1)}}), gone); ok {
		t.Error("a record with nothing beyond the deleted one should rebase to nothing")
	}
	// A failure in the same millisecond as one of gone's is its own: fails
	// with the set difference this replaced (nothing was left).
	got, ok = RebaseOnDelete(EncodeRecord(Record{Failures: []time.Time{at(1), at(2), at(2)}}), gone)
	if want := EncodeRecord(Record{Failures: []time.Time{at(2)}}); !ok || string(got) != string(want) {
		r, _ := DecodeRecord(got)
		t.Errorf("rebase of a second failure at one of gone's instants = %+v, %v; want that failure kept", r, ok)
	}
	if got, ok := RebaseOnDelete([]byte("not a record"), gone); !ok || string(got) != "not a record" {
		t.Errorf("a value that is not a record = %q, %v; want it kept", got, ok)
	}
}

// TestMergeFrom: a record computed from base merges into older as what it
// changed in base, counting instants as a multiset.
func TestMergeFrom(t *testing.T) {
	t0 := time.UnixMilli(1_800_000_000_000).UTC()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Millisecond) }
	rec := func(s ...int) Record {
		var r Record
		for _, x := range s {
			r.Failures = append(r.Failures, at(x))
		}
		return r
	}
	for _, tc := range []struct {
		name               string
		base, older, newer Record
		built              bool
		want               Record
	}{
		// Two failures in one millisecond: Merge would keep one.
		{"same-instant-counted-twice", rec(1), rec(1, 2), rec(1, 2), false, rec(1, 2, 2)},
		{"from-absent-adds-all", Record{}, rec(2), rec(2), true, rec(2, 2)},
		// Older clamped base's 3 to its now, 2: it stays out.
		{"removed-by-older-stays-out", rec(3), rec(2, 2), rec(3, 4), true, rec(2, 2, 4)},
		// Older never saw base (not built on it): the union.
		{"not-built-falls-back", rec(3), rec(5), rec(3, 4), false, rec(3, 4, 5)},
		{"restraint-and-probing",
			rec(1), Record{Failures: []time.Time{at(1), at(2)}, RestrainedUntil: at(100), Probing: true},
			Record{Failures: []time.Time{at(1), at(3)}, RestrainedUntil: at(50)}, false,
			Record{Failures: []time.Time{at(1), at(2), at(3)}, RestrainedUntil: at(100), Probing: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var base []byte
			if !tc.base.IsZero() {
				base = EncodeRecord(tc.base)
			}
			got := MergeFrom(base, EncodeRecord(tc.older), EncodeRecord(tc.newer), tc.built)
			if want := EncodeRecord(tc.want); string(got) != string(want) {
				r, _ := DecodeRecord(got)
				t.Errorf("MergeFrom = %+v, want %+v", r, tc.want)
			}
		})
	}
}

// TestMergeOutage: the back-off level and the outage start survive a merge
// of concurrent writes, and a merge never yields a record that does not
// encode (released and restrained, or since alone).
func TestMergeOutage(t *testing.T) {
	ms := func(d time.Duration) time.Time { return at(d).Truncate(time.Millisecond) }
	open := Record{Failures: []time.Time{ms(0)}, RestrainedUntil: ms(time.Hour), Backoff: 2, Since: ms(-time.Hour)}
	reopened := Record{Failures: []time.Time{ms(time.Minute)}, RestrainedUntil: ms(2 * time.Hour), Backoff: 3, Since: ms(-30 * time.Minute)}
	released := Record{Since: ms(-2 * time.Hour), Released: ms(3 * time.Hour)}
	closed := Record{Failures: []time.Time{ms(5 * time.Hour)}}
	for _, tc := range []struct {
		name      string
		a, b      Record
		want      Record
		wantFails int
	}{
		{name: "two opens", a: open, b: reopened, want: Record{RestrainedUntil: ms(2 * time.Hour), Backoff: 3, Since: ms(-time.Hour)}, wantFails: 2},
		{name: "open and released", a: released, b: open, want: Record{RestrainedUntil: ms(time.Hour), Backoff: 2, Since: ms(-2 * time.Hour)}, wantFails: 1},
		{name: "released and closed", a: released, b: closed, want: Record{Since: ms(-2 * time.Hour), Released: ms(3 * time.Hour)}, wantFails: 1},
		{name: "closed and closed", a: closed, b: Record{Failures: []time.Time{ms(6 * time.Hour)}}, want: Record{}, wantFails: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, got := range []Record{
				mustDecode(t, Merge(EncodeRecord(tc.a), EncodeRecord(tc.b))),
				mustDecode(t, MergeFrom(nil, EncodeRecord(tc.a), EncodeRecord(tc.b), true)),
			} {
				if got.Backoff != tc.want.Backoff || !got.Since.Equal(tc.want.Since) || !got.Released.Equal(tc.want.Released) ||
					!got.RestrainedUntil.Equal(tc.want.RestrainedUntil) || len(got.Failures) != tc.wantFails {
					t.Fatalf("merged %+v, want %+v with %d failures", got, tc.want, tc.wantFails)
				}
			}
		})
	}
}

func mustDecode(t *testing.T, b []byte) Record {
	t.Helper()
	r, err := DecodeRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
