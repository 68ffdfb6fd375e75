package record

import (
	"slices"
	"time"
)

// RebaseOnDelete turns a record computed from gone (a record since deleted
// by a Success) into what it adds to an absent record: the failure instants
// not in gone. Its restraint and probing came from gone's failures or
// restraint, which the Success ended, so they go. ok is false when nothing is
// left. A value that is not a record is kept as it is.
func RebaseOnDelete(value, gone []byte) (_ []byte, ok bool) {
	r, err := DecodeRecord(value)
	if err != nil {
		return value, true
	}
	g, _ := DecodeRecord(gone)
	var out Record
	for _, f := range r.Failures {
		if !slices.ContainsFunc(g.Failures, f.Equal) {
			out.Failures = append(out.Failures, f)
		}
	}
	if len(out.Failures) == 0 {
		return nil, false
	}
	return EncodeRecord(out), true
}

// Merge merges two encoded Records written concurrently: the
// union of their failure instants (sorted, duplicates once; not capped, as
// the next Failure prunes to the history limit, so no failure is lost), the
// later RestrainedUntil, and Probing if either was probing. If either does
// not decode, the newer wins.
func Merge(older, newer []byte) []byte {
	a, errA := DecodeRecord(older)
	b, errB := DecodeRecord(newer)
	if errA != nil || errB != nil {
		return newer
	}
	var r Record
	r.Failures = slices.Concat(a.Failures, b.Failures)
	slices.SortFunc(r.Failures, func(x, y time.Time) int { return x.Compare(y) })
	r.Failures = slices.CompactFunc(r.Failures, time.Time.Equal)
	r.RestrainedUntil = a.RestrainedUntil
	if b.RestrainedUntil.After(r.RestrainedUntil) {
		r.RestrainedUntil = b.RestrainedUntil
	}
	r.Probing = (a.Probing || b.Probing) && !r.RestrainedUntil.IsZero()
	if len(r.Failures) == 0 {
		r.Failures = nil
	}
	return EncodeRecord(r)
}
