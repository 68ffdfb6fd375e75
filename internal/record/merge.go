package record

import (
	"slices"
	"time"
)

// RebaseOnDelete turns a record computed from gone (a record since deleted
// by a Success) into what it adds to an absent record: its failure instants
// less gone's, counted as a multiset. Its restraint and probing came from gone's failures or
// restraint, which the Success ended, so they go. ok is false when nothing is
// left. A value that is not a record is kept as it is.
func RebaseOnDelete(value, gone []byte) (_ []byte, ok bool) {
	r, err := DecodeRecord(value)
	if err != nil {
		return value, true
	}
	g, _ := DecodeRecord(gone)
	// A multiset difference: a failure in the same millisecond as one of
	// gone's is still a failure of its own.
	left := slices.Clone(g.Failures)
	var out Record
	for _, f := range r.Failures {
		if i := slices.IndexFunc(left, f.Equal); i >= 0 {
			left = slices.Delete(left, i, i+1)
			continue
		}
		out.Failures = append(out.Failures, f)
	}
	if len(out.Failures) == 0 {
		return nil, false
	}
	return EncodeRecord(out), true
}

// Merge merges two encoded Records written concurrently: the
// union of their failure instants (sorted, duplicates once; not capped, as
// the next Failure prunes to the history limit, so no failure is lost), the
// later RestrainedUntil, Probing if either was probing, and the outage
// fields as mergeOutage keeps them. If either does
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
	mergeOutage(&r, a, b)
	return EncodeRecord(r)
}

// MergeFrom merges newer, a record computed from base, into older, a record
// written meanwhile that was also built on base: older plus what newer
// changed in base, counting failure instants as a multiset (per instant,
// older's count plus newer's minus base's, at least zero). Instants are
// milliseconds, so two failures can share one (two calls within a
// millisecond, or a later instant clamped to an earlier writer's now):
// Merge's set union counts them once, MergeFrom as often as they happened.
// An instant of base that older no longer holds was removed by older's line
// (pruned, or clamped to a writer's now), so it stays out. The restraint and
// probing merge as in Merge. Unless built (the caller knows older was built
// on base), base's failures must all be in older, else older may never have
// seen base (another process's record) and it falls back to Merge; so it
// does when a value does not decode.
func MergeFrom(base, older, newer []byte, built bool) []byte {
	o, errO := DecodeRecord(older)
	n, errN := DecodeRecord(newer)
	if errO != nil || errN != nil {
		return newer
	}
	b, errB := DecodeRecord(base)
	if len(base) == 0 {
		b, errB = Record{}, nil // computed from an absent record
	}
	if errB != nil {
		return Merge(older, newer)
	}
	count := make(map[int64]int, len(o.Failures)+len(n.Failures))
	for _, f := range o.Failures {
		count[f.UnixMilli()]++
	}
	for _, f := range b.Failures {
		if count[f.UnixMilli()]--; count[f.UnixMilli()] < 0 && !built {
			return Merge(older, newer)
		}
	}
	for _, f := range n.Failures {
		count[f.UnixMilli()]++
	}
	var r Record
	for ms, c := range count {
		// Negative: older removed what base had, and newer did not add it.
		for range c {
			r.Failures = append(r.Failures, time.UnixMilli(ms).UTC())
		}
	}
	slices.SortFunc(r.Failures, func(x, y time.Time) int { return x.Compare(y) })
	r.RestrainedUntil = o.RestrainedUntil
	if n.RestrainedUntil.After(r.RestrainedUntil) {
		r.RestrainedUntil = n.RestrainedUntil
	}
	r.Probing = (o.Probing || n.Probing) && !r.RestrainedUntil.IsZero()
	mergeOutage(&r, o, n)
	return EncodeRecord(r)
}

// mergeOutage sets r's back-off and release fields from two concurrent
// records whose restraint and failures r already merged: the higher
// back-off level and the earlier outage start while restrained (the longer
// view of one outage); the later release instant while not. Fields the
// merged restraint rules out are dropped, so r encodes.
func mergeOutage(r *Record, a, b Record) {
	r.Since = earliest(a.Since, b.Since)
	if !r.RestrainedUntil.IsZero() {
		r.Backoff = max(a.Backoff, b.Backoff)
		return
	}
	r.Released = a.Released
	if b.Released.After(r.Released) {
		r.Released = b.Released
	}
	if r.Released.IsZero() || r.Since.IsZero() {
		r.Since, r.Released = time.Time{}, time.Time{}
	}
}

// earliest is the earlier of two instants, ignoring a zero one.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
