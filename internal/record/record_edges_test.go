package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"
)

// The tests in this file kill mutants (go run ./tools/mutants -pkg
// internal/record) that the package's other tests let live.

// TestIsZeroAndOpened: Record.IsZero is false as soon as any field is set,
// and Record.Opened is the newest failure, zero without failures.
func TestIsZeroAndOpened(t *testing.T) {
	f := []time.Time{at(0), at(time.Second), at(time.Minute)}
	for _, tc := range []struct {
		name   string
		r      Record
		zero   bool
		opened time.Time
	}{
		{name: "zero", r: Record{}, zero: true},
		{name: "empty failures", r: Record{Failures: []time.Time{}}, zero: true},
		{name: "one failure", r: Record{Failures: f[:1]}, opened: f[0]},
		{name: "three failures", r: Record{Failures: f}, opened: f[2]},
		{name: "restrained", r: Record{RestrainedUntil: at(time.Hour)}},
		{name: "probing", r: Record{Probing: true}},
	} {
		if got := tc.r.IsZero(); got != tc.zero {
			t.Errorf("%s: IsZero() = %v, want %v", tc.name, got, tc.zero)
		}
		if got := tc.r.Opened(); !got.Equal(tc.opened) || got.IsZero() != tc.opened.IsZero() {
			t.Errorf("%s: Opened() = %v, want %v", tc.name, got, tc.opened)
		}
	}
}

// rec builds record bytes by hand: flags, an optional restrained-until
// varint, the count, the first failure's varint and the gaps.
func rec(flags byte, until *int64, count uint64, first *int64, gaps ...uint64) []byte {
	b := []byte{recordFormat, flags}
	if until != nil {
		b = binary.AppendVarint(b, *until)
	}
	b = binary.AppendUvarint(b, count)
	if first != nil {
		b = binary.AppendVarint(b, *first)
	}
	for _, g := range gaps {
		b = binary.AppendUvarint(b, g)
	}
	return b
}

func p(v int64) *int64 { return &v }

// TestDecodeReasons: each malformed record is refused for its own reason
// (a check removed or loosened would let a later one, or none, refuse
// it), and the records at the edges of the limits decode.
func TestDecodeReasons(t *testing.T) {
	for _, tc := range []struct {
		name, in, reason string
		b                []byte
	}{
		{name: "no count", b: []byte{recordFormat, 0}, reason: "bad failure count"},
		{name: "one byte", b: []byte{recordFormat}, reason: "1 bytes, too short"},
		{name: "non-canonical count", b: []byte{recordFormat, 0, 0x80, 0x00}, reason: "bad failure count"},
		{name: "count beyond the bytes", b: rec(0, nil, 2, p(5)), reason: "claims 2 failures in 1 bytes"},
		{name: "count beyond MaxFailures", b: append(rec(0, nil, MaxFailures+1, p(0)), make([]byte, MaxFailures+1)...), reason: "claims 4097 failures in 4098 bytes"},
		{name: "non-canonical first failure", b: append(rec(0, nil, 1, nil), 0x80, 0x00), reason: "bad first failure"},
		{name: "first failure overflows up", b: rec(flagRestrained, p(math.MaxInt64), 1, p(1)), reason: "bad first failure"},
		{name: "first failure overflows down", b: rec(flagRestrained, p(math.MinInt64+5), 1, p(-6)), reason: "bad first failure"},
		{name: "non-canonical gap", b: append(rec(0, nil, 2, p(0)), 0x80, 0x00), reason: "bad gap before failure 1"},
		{name: "gap overflows", b: rec(0, nil, 2, p(1), math.MaxInt64), reason: "bad gap before failure 1"},
	} {
		_, err := DecodeRecord(tc.b)
		re, ok := errors.AsType[*RecordError](err)
		if !ok || re.Reason != tc.reason {
			t.Errorf("%s: DecodeRecord(%x) = %v, want reason %q", tc.name, tc.b, err, tc.reason)
		}
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{name: "restraint and failure at the end of time", b: rec(flagRestrained, p(math.MaxInt64-1), 1, p(1))},
		{name: "restraint and failure at the start of time", b: rec(flagRestrained, p(math.MinInt64+6), 1, p(-6))},
		{name: "gap to the end of time", b: rec(0, nil, 2, p(0), math.MaxInt64)},
		{name: "MaxFailures", b: append(rec(0, nil, MaxFailures, p(0)), make([]byte, MaxFailures-1)...)},
	} {
		r, err := DecodeRecord(tc.b)
		if err != nil {
			t.Errorf("%s: DecodeRecord(%x) = %v", tc.name, tc.b, err)
			continue
		}
		if again := EncodeRecord(r); !bytes.Equal(again, tc.b) {
			t.Errorf("%s: re-encoded as %x, want %x", tc.name, again, tc.b)
		}
	}
}

// TestMergeEdges: Merge and MergeFrom answer the newer value when either
// side does not decode, keep a single shared failure, fall back to Merge
// for an undecodable base, and never set Probing on a record that is not
// probing.
func TestMergeEdges(t *testing.T) {
	garbage := []byte("garbage")
	one := EncodeRecord(Record{Failures: []time.Time{at(0)}})
	two := EncodeRecord(Record{Failures: []time.Time{at(0), at(time.Second)}})
	open := EncodeRecord(Record{Failures: []time.Time{at(0)}, RestrainedUntil: at(time.Hour)})
	check := func(name string, got, want []byte) {
		t.Helper()
		if !bytes.Equal(got, want) {
			g, _ := DecodeRecord(got)
			w, _ := DecodeRecord(want)
			t.Errorf("%s = %x (%+v), want %x (%+v)", name, got, g, want, w)
		}
	}
	check("Merge(record, garbage)", Merge(one, garbage), garbage)
	check("Merge(garbage, record)", Merge(garbage, one), one)
	check("Merge(one, one)", Merge(one, one), one)
	check("MergeFrom(absent, record, garbage)", MergeFrom(nil, one, garbage, true), garbage)
	check("MergeFrom(absent, garbage, record)", MergeFrom(nil, garbage, two, true), two)
	// An undecodable base: Merge's union, not MergeFrom's multiset.
	check("MergeFrom(garbage, one, two)", MergeFrom(garbage, one, two, true), two)
	check("MergeFrom(absent, open, open)", MergeFrom(nil, open, open, true),
		EncodeRecord(Record{Failures: []time.Time{at(0), at(0)}, RestrainedUntil: at(time.Hour)}))
}

// TestMergeFromSorted: MergeFrom's failures come out oldest first, whatever
// order the counting map gives them in.
func TestMergeFromSorted(t *testing.T) {
	var older, newer Record
	for i := range 30 {
		older.Failures = append(older.Failures, at(time.Duration(i)*time.Second))
	}
	newer.Failures = append(append(newer.Failures, older.Failures...), at(time.Minute))
	got, err := DecodeRecord(MergeFrom(EncodeRecord(older), EncodeRecord(older), EncodeRecord(newer), true))
	if err != nil {
		t.Fatal(err)
	}
	if !equalRecords(got, newer) {
		t.Fatalf("MergeFrom = %v, want %v", got.Failures, newer.Failures)
	}
}
