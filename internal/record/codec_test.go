package record

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
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
		{name: "backed-off", rec: Record{Failures: []time.Time{ms(0)}, RestrainedUntil: ms(time.Hour), Backoff: 3}},
		{name: "backed-off-since", rec: Record{Failures: []time.Time{ms(0)}, RestrainedUntil: ms(time.Hour), Probing: true, Backoff: MaxBackoff, Since: ms(-time.Minute)}},
		{name: "since-after-restraint", rec: Record{RestrainedUntil: ms(time.Hour), Since: ms(2 * time.Hour)}},
		{name: "released", rec: Record{Since: ms(0), Released: ms(20 * time.Minute)}},
		{name: "released-with-failure", rec: Record{Failures: []time.Time{ms(21 * time.Minute)}, Since: ms(0), Released: ms(20 * time.Minute)}},
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
		{name: "backoff-zero", in: []byte{1, flagBackoff, 0, 0}},
		{name: "backoff-above-max", in: binary.AppendUvarint([]byte{1, flagBackoff, 0}, MaxBackoff+1)},
		{name: "backoff-missing", in: []byte{1, flagBackoff, 0}},
		{name: "since-without-base", in: []byte{1, flagSince, 0, 0}},
		{name: "released-without-since", in: []byte{1, flagReleased, 2, 0}},
		{name: "restrained-and-released", in: []byte{1, flagRestrained | flagReleased | flagSince, 2, 2, 0, 0}},
		{name: "released-zero-instant", in: append(binary.AppendVarint([]byte{1, flagReleased | flagSince}, time.Time{}.UnixMilli()), 0, 0)},
		{name: "since-zero-instant", in: binary.AppendVarint([]byte{1, flagRestrained | flagSince, 2, 0}, time.Time{}.UnixMilli()-1)},
		{name: "since-overflow", in: binary.AppendVarint([]byte{1, flagRestrained | flagSince, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0}, math.MaxInt64)},
		{name: "since-missing", in: []byte{1, flagRestrained | flagSince, 2, 0}},
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
	if len(a.Failures) != len(b.Failures) || !a.RestrainedUntil.Equal(b.RestrainedUntil) || a.Probing != b.Probing ||
		a.Backoff != b.Backoff || !a.Since.Equal(b.Since) || !a.Released.Equal(b.Released) {
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
	f.Add(EncodeRecord(Record{Failures: []time.Time{at(0)}, RestrainedUntil: at(time.Hour), Probing: true, Backoff: 4, Since: at(-time.Hour)}))
	f.Add(EncodeRecord(Record{Since: at(0), Released: at(time.Hour)}))
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

// TestRecordGolden pins the bytes: a record without the back-off and release
// fields encodes exactly as before they existed (older workers read it), and
// one with them in the layout codec.go documents.
func TestRecordGolden(t *testing.T) {
	base := time.UnixMilli(1_000_000).UTC()
	cases := []struct {
		name string
		rec  Record
		hex  string
	}{
		{name: "absent", rec: Record{}, hex: "010000"},
		{name: "closed", rec: Record{Failures: []time.Time{base, base.Add(time.Second)}}, hex: "01000280897ae807"},
		{name: "half-open", rec: Record{Failures: []time.Time{base}, RestrainedUntil: base.Add(time.Minute), Probing: true}, hex: "0103c0b2810101bfa907"},
		{name: "backed-off", rec: Record{Failures: []time.Time{base}, RestrainedUntil: base.Add(time.Minute), Backoff: 3}, hex: "0105c0b2810101bfa90703"},
		{name: "since", rec: Record{RestrainedUntil: base.Add(time.Minute), Backoff: 1, Since: base}, hex: "010dc0b281010001bfa907"},
		{name: "released", rec: Record{Since: base, Released: base.Add(time.Minute)}, hex: "0118c0b2810100bfa907"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := EncodeRecord(tc.rec)
			if got := hex.EncodeToString(b); got != tc.hex {
				t.Fatalf("encoding = %s, want %s", got, tc.hex)
			}
			want, _ := hex.DecodeString(tc.hex)
			r, err := DecodeRecord(want)
			if err != nil || !equalRecords(r, tc.rec) {
				t.Fatalf("decoding %s = %+v, %v; want %+v", tc.hex, r, err, tc.rec)
			}
		})
	}
}
