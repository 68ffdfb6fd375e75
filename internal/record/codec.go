package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// The record's wire format, version 1 (all integers varints):
//
//	byte    format version (1)
//	byte    flags: 1 = restrained, 2 = probing, 4 = backoff, 8 = since,
//	        16 = released
//	varint  RestrainedUntil, Unix milliseconds (only if restrained)
//	varint  Released, Unix milliseconds (only if released)
//	uvarint number of failures n
//	varint  first failure, Unix milliseconds, minus the base (RestrainedUntil,
//	        else Released, else 0)
//	uvarint n-1 gaps to the next failure, milliseconds
//	uvarint Backoff, at least 1 (only if backoff)
//	varint  Since, Unix milliseconds, minus the base (only if since)
//
// Times are kept to the millisecond; a threshold-5 record is about 20 bytes.
//
// Flags 4, 8 and 16 are read by this release and written only when
// Settings turns recovery back-off or the paced release on: a worker of an
// older release reads such a record as undecodable (absent) and overwrites
// it, so the options are for a fleet that runs only releases that read
// them (docs/RELEASING.md, the record format).
const (
	recordFormat   = 1
	flagRestrained = 1 << 0
	flagProbing    = 1 << 1
	flagBackoff    = 1 << 2
	flagSince      = 1 << 3
	flagReleased   = 1 << 4
	knownFlags     = flagRestrained | flagProbing | flagBackoff | flagSince | flagReleased
)

// MaxBackoff bounds Record.Backoff as the decoder accepts it. The machine
// stops counting once the restraint reaches its cap, which a multiplier
// above 1 does in far fewer steps.
const MaxBackoff = 1 << 10

// MaxFailures bounds the failures a record holds and the decoder accepts,
// far above any sane FailureThreshold or HistoryLimit, so a hostile record
// cannot make it allocate much. NewConfig refuses settings above it: such
// records would stop decoding, read as absent, and never open the circuit.
const MaxFailures = 1 << 12

// ErrCorruptRecord is matched (errors.Is) by every decoding error; a
// *RecordError says what was wrong. Breaker treats such a record as absent
// and overwrites it on its next write.
var ErrCorruptRecord = errors.New("kvbreaker: corrupt record")

// ErrFutureRecord is matched by a record written in a newer format than this
// build understands.
var ErrFutureRecord = errors.New("kvbreaker: record format from a newer version")

// RecordError describes a record that could not be decoded.
type RecordError struct {
	Format byte // the format byte found, 0 if the record was empty
	Reason string
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("kvbreaker: cannot decode record (format %d): %s", e.Format, e.Reason)
}

// Is matches ErrCorruptRecord, and ErrFutureRecord for an unknown newer format.
func (e *RecordError) Is(target error) bool {
	return target == ErrCorruptRecord || (target == ErrFutureRecord && e.Format > recordFormat)
}

// AppendRecord appends r's encoding to dst. Times are truncated to the
// millisecond.
func AppendRecord(dst []byte, r Record) []byte {
	var flags byte
	var base int64
	switch {
	case !r.RestrainedUntil.IsZero():
		flags |= flagRestrained
		base = r.RestrainedUntil.UnixMilli()
	case !r.Released.IsZero():
		flags |= flagReleased
		base = r.Released.UnixMilli()
	}
	if r.Probing {
		flags |= flagProbing
	}
	if r.Backoff > 0 {
		flags |= flagBackoff
	}
	if !r.Since.IsZero() {
		flags |= flagSince
	}
	dst = append(dst, recordFormat, flags)
	if flags&(flagRestrained|flagReleased) != 0 {
		dst = binary.AppendVarint(dst, base)
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.Failures)))
	prev := base
	for i, f := range r.Failures {
		ms := f.UnixMilli()
		if i == 0 {
			dst = binary.AppendVarint(dst, ms-base)
		} else {
			dst = binary.AppendUvarint(dst, uint64(max(ms-prev, 0)))
		}
		prev = ms
	}
	if flags&flagBackoff != 0 {
		dst = binary.AppendUvarint(dst, uint64(r.Backoff))
	}
	if flags&flagSince != 0 {
		dst = binary.AppendVarint(dst, r.Since.UnixMilli()-base)
	}
	return dst
}

// EncodeRecord returns r's encoding.
func EncodeRecord(r Record) []byte { return AppendRecord(make([]byte, 0, 24+6*len(r.Failures)), r) }

// DecodeRecord decodes a record. It never panics, allocates at most in
// proportion to len(b), and reports any problem as a *RecordError.
func DecodeRecord(b []byte) (Record, error) {
	var r Record
	if len(b) < 2 {
		return r, &RecordError{Reason: fmt.Sprintf("%d bytes, too short", len(b))}
	}
	format, flags := b[0], b[1]
	if format != recordFormat {
		return r, &RecordError{Format: format, Reason: "unknown format"}
	}
	fail := func(reason string) (Record, error) {
		return Record{}, &RecordError{Format: format, Reason: reason}
	}
	if flags&^knownFlags != 0 {
		return fail(fmt.Sprintf("unknown flags %#x", flags))
	}
	b = b[2:]
	var base int64
	switch {
	case flags&flagRestrained != 0 && flags&flagReleased != 0:
		return fail("restrained and released")
	case flags&flagReleased != 0 && flags&flagSince == 0:
		return fail("released without since")
	case flags&flagSince != 0 && flags&(flagRestrained|flagReleased) == 0:
		return fail("since without restraint or release")
	}
	if flags&flagReleased != 0 {
		v, n := binary.Varint(b)
		if !canonical(b, n) {
			return fail("bad released")
		}
		base, b = v, b[n:]
		if r.Released = time.UnixMilli(base).UTC(); r.Released.IsZero() {
			return fail("released at the zero instant")
		}
	}
	if flags&flagRestrained != 0 {
		v, n := binary.Varint(b)
		if !canonical(b, n) {
			return fail("bad restrained-until")
		}
		base, b = v, b[n:]
		r.RestrainedUntil = time.UnixMilli(base).UTC()
		if r.RestrainedUntil.IsZero() {
			// time.Time{} means "not restrained": it has no encoding
			// with the flag set, so accepting it would break the
			// one-encoding-per-record rule.
			return fail("restrained until the zero instant")
		}
	} else if flags&flagProbing != 0 {
		return fail("probing without restraint")
	}
	r.Probing = flags&flagProbing != 0
	count, n := binary.Uvarint(b)
	if !canonical(b, n) {
		return fail("bad failure count")
	}
	b = b[n:]
	// Each failure takes at least one byte: a count the bytes cannot hold
	// is a lie, rejected before allocating.
	if count > MaxFailures || count > uint64(len(b)) {
		return fail(fmt.Sprintf("claims %d failures in %d bytes", count, len(b)))
	}
	if count > 0 {
		r.Failures = make([]time.Time, count)
		first, n := binary.Varint(b)
		if !canonical(b, n) || (first > 0 && base > math.MaxInt64-first) || (first < 0 && base < math.MinInt64-first) {
			return fail("bad first failure")
		}
		b = b[n:]
		ms := base + first
		r.Failures[0] = time.UnixMilli(ms).UTC()
		for i := 1; i < int(count); i++ {
			gap, n := binary.Uvarint(b)
			if !canonical(b, n) || gap > math.MaxInt64-uint64(max(ms, 0)) {
				return fail(fmt.Sprintf("bad gap before failure %d", i))
			}
			b = b[n:]
			ms += int64(gap)
			r.Failures[i] = time.UnixMilli(ms).UTC()
		}
	}
	if flags&flagBackoff != 0 {
		v, n := binary.Uvarint(b)
		if !canonical(b, n) || v == 0 || v > MaxBackoff {
			return fail("bad backoff")
		}
		r.Backoff, b = int(v), b[n:]
	}
	if flags&flagSince != 0 {
		d, n := binary.Varint(b)
		if !canonical(b, n) || (d > 0 && base > math.MaxInt64-d) || (d < 0 && base < math.MinInt64-d) {
			return fail("bad since")
		}
		b = b[n:]
		if r.Since = time.UnixMilli(base + d).UTC(); r.Since.IsZero() {
			return fail("since the zero instant")
		}
	}
	if len(b) != 0 {
		return fail(fmt.Sprintf("%d trailing bytes", len(b)))
	}
	return r, nil
}

// canonical reports whether a varint of n bytes was read from b and is in its
// shortest form, so every record has exactly one encoding.
func canonical(b []byte, n int) bool {
	return n > 0 && (n == 1 || b[n-1] != 0)
}
