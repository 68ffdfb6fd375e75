package record

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

func TestRecordRoundTrip(t *testing.T) {
	ms := func(d time.Duration) time.Time { return at(d).Truncate(time.Millisecond) }
	cases := []struct {
		name string
		rec  Record
	}{
		{name: "zero", rec: Record{}},
		{name: "closed-one-failure", rec: Record{Failures: []time.Time{ms(0)}}},
		{name: "open-threshold-5", rec: Record{Failures: []time.Time{ms(0), ms(time.Second), ms(2 * time.Minute), ms(9 * time.Minute), ms(10 * time.Minute)}, RestrainedUntil: ms(40 * time.Minute)}},
		{name: "half-open", rec: Record{Failures: []time.Time{ms(0)}, RestrainedUntil: ms(time.Hour), Probing: true}},
		{name: "before-epoch", rec: Record{Failures: []time.Time{time.UnixMilli(-5000).UTC()}}},
		{name: "failure-after-restraint", rec: Record{Failures: []time.Time{ms(2 * time.Hour)}, RestrainedUntil: ms(time.Hour)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := EncodeRecord(tc.rec)
			got, err := DecodeRecord(b)
			if err != nil {
				t.Fatal(err)
			}
			if !equalRecords(got, tc.rec) {
				t.Fatalf("round trip: got %+v, want %+v", got, tc.rec)
			}
		})
	}
}

// TestRecordSize pins the size target: a threshold-5 open record with
// failures spread over a 10-minute window fits in 64 bytes.
func TestRecordSize(t *testing.T) {
	now := time.Now().Truncate(time.Millisecond)
	r := Record{RestrainedUntil: now.Add(30 * time.Minute), Probing: true}
	for i := range 5 {
		r.Failures = append(r.Failures, now.Add(-time.Duration(5-i)*2*time.Minute+time.Duration(i)*123*time.Millisecond))
	}
	n := len(EncodeRecord(r))
	t.Logf("threshold-5 half-open record: %d bytes", n)
	if n > 64 {
		t.Fatalf("record is %d bytes, target is at most 64", n)
	}
}

func TestDecodeRejects(t *testing.T) {
	valid := EncodeRecord(Record{Failures: []time.Time{at(0), at(time.Second)}, RestrainedUntil: at(time.Hour)})
	cases := []struct {
		name   string
		in     []byte
		future bool
	}{
		{name: "empty", in: nil},
		{name: "one-byte", in: []byte{1}},
		{name: "future-format", in: []byte{9, 0, 0}, future: true},
		{name: "format-zero", in: []byte{0, 0, 0}},
		{name: "unknown-flags", in: []byte{1, 0x80, 0}},
		{name: "probing-without-restraint", in: []byte{1, flagProbing, 0}},
		{name: "million-failures-claimed", in: []byte{1, 0, 0xc0, 0x84, 0x3d, 0, 0, 0}},
		{name: "truncated", in: valid[:len(valid)-1]},
		{name: "trailing", in: append(append([]byte{}, valid...), 0)},
		{name: "bad-varint", in: []byte{1, flagRestrained, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRecord(tc.in)
			if !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("err = %v, want ErrCorruptRecord", err)
			}
			if _, ok := errors.AsType[*RecordError](err); !ok {
				t.Fatalf("err %T is not a *RecordError", err)
			}
			if errors.Is(err, ErrFutureRecord) != tc.future {
				t.Fatalf("errors.Is(err, ErrFutureRecord) = %v, want %v", !tc.future, tc.future)
			}
		})
	}
}

func equalRecords(a, b Record) bool {
	if len(a.Failures) != len(b.Failures) || !a.RestrainedUntil.Equal(b.RestrainedUntil) || a.Probing != b.Probing {
		return false
	}
	for i := range a.Failures {
		if !a.Failures[i].Equal(b.Failures[i]) {
			return false
		}
	}
	return true
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(EncodeRecord(Record{}))
	f.Add(EncodeRecord(Record{Failures: []time.Time{at(0), at(time.Minute)}, RestrainedUntil: at(time.Hour), Probing: true}))
	f.Add([]byte{1, 0, 0xc0, 0x84, 0x3d})
	// Restrained flag with Go's zero instant: time.Time{} has no encoding
	// of its own (it means "not restrained"), so decoding must refuse it
	// rather than return a record that re-encodes without the flag.
	f.Add(append(binary.AppendVarint([]byte{recordFormat, flagRestrained}, time.Time{}.UnixMilli()), 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(r.Failures) > len(b) {
			t.Fatalf("%d failures from %d bytes", len(r.Failures), len(b))
		}
		// Whatever decodes re-encodes to the same bytes: one encoding
		// per record, so nothing is silently changed on rewrite.
		again := EncodeRecord(r)
		if string(again) != string(b) {
			t.Fatalf("re-encoding %x gave %x", b, again)
		}
	})
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }
