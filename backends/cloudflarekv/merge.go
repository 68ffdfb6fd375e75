package cloudflarekv

import (
	"slices"
	"time"

	"github.com/kvbreaker/kvbreaker/core"
)

// write is one queued write of a key: a put (value, ttl, exp) or a delete.
// ver identifies it (the version Get will show for a put); base is the
// version its caller read before computing it.
type write struct {
	del   bool
	value []byte
	ttl   time.Duration
	exp   time.Time // logical expiry, by the writer's clock; zero for a delete
	ver   core.Version
	base  core.Version
	// goneVer and goneVal are the version the latest local delete in this
	// write's line removed, and that version's value. A write computed from
	// goneVer was computed from a record a Success has since deleted.
	goneVer core.Version
	goneVal []byte
}

// combine merges newer into older (the queued write, or this store's write
// in flight or last sent), as CompareAndSwap documents. now is the writer's
// clock. It is the whole merge policy, a pure function, so that it can move
// next to core's transitions:
//
//   - a write computed from a version a local delete removed keeps only the
//     failure instants it added to that version: no restraint, no probing,
//     none of the deleted failures (rebaseOnDelete); if nothing is left,
//     older stands;
//   - a delete replaces older; a write replaces a delete, a write it was
//     computed from (newer.base == older.ver), and a write whose logical
//     expiry has passed at now (its record no longer exists for any
//     reader, so nothing of it may come back);
//   - otherwise the two were computed concurrently and their records are
//     merged (mergeRecords), with the later expiry and longer TTL.
//
// The result carries the latest delete's goneVer/goneVal on.
func combine(older, newer write, now time.Time) write {
	if !newer.del && older.goneVer != core.NoVersion && newer.base == older.goneVer {
		v, ok := rebaseOnDelete(newer.value, older.goneVal)
		if !ok {
			return older
		}
		newer.value = v
	}
	var merged write
	switch {
	case newer.del:
		return newer
	case older.del, newer.base == older.ver, !now.Before(older.exp):
		merged = newer
	default:
		merged = newer
		merged.value = mergeRecords(older.value, newer.value)
		merged.ttl = max(older.ttl, newer.ttl)
		if older.exp.After(newer.exp) {
			merged.exp = older.exp
		}
		merged.base = older.base
	}
	merged.goneVer, merged.goneVal = older.goneVer, older.goneVal
	return merged
}

// rebaseOnDelete turns a record computed from gone (a record since deleted
// by a Success) into what it adds to an absent record: the failure instants
// not in gone. Its restraint and probing came from gone's failures or
// restraint, which the Success ended, so they go. ok is false when nothing is
// left. A value that is not a record is kept as it is.
func rebaseOnDelete(value, gone []byte) (_ []byte, ok bool) {
	r, err := core.DecodeRecord(value)
	if err != nil {
		return value, true
	}
	g, _ := core.DecodeRecord(gone)
	var out core.Record
	for _, f := range r.Failures {
		if !slices.ContainsFunc(g.Failures, f.Equal) {
			out.Failures = append(out.Failures, f)
		}
	}
	if len(out.Failures) == 0 {
		return nil, false
	}
	return core.EncodeRecord(out), true
}

// mergeRecords merges two encoded core.Records written concurrently: the
// union of their failure instants (sorted, duplicates once; not capped, as
// the next Failure prunes to the history limit, so no failure is lost), the
// later RestrainedUntil, and Probing if either was probing. If either does
// not decode, the newer wins.
func mergeRecords(older, newer []byte) []byte {
	a, errA := core.DecodeRecord(older)
	b, errB := core.DecodeRecord(newer)
	if errA != nil || errB != nil {
		return newer
	}
	var r core.Record
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
	return core.EncodeRecord(r)
}
