package cloudflarekv

import (
	"time"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// write is one queued write of a key: a put (value, ttl, exp) or a delete.
// ver identifies it (the version Get will show for a put); base is the
// version its caller read before computing it.
type write struct {
	del   bool
	value []byte
	ttl   time.Duration
	exp   time.Time // logical expiry, by the writer's clock; zero for a delete
	ver   driver.Version
	base  driver.Version
	// baseVal is the value the caller read as base, when the store still
	// knew it (baseKnown; nil for an absent record): a concurrent write is
	// then merged as what it changed in baseVal (adapter.MergeRecordsFrom).
	// baseLocal: base is a write of this store (or absent), so every
	// later local write was built on it.
	baseVal   []byte
	baseKnown bool
	baseLocal bool
	// goneVer and goneVal are the version the latest local delete in this
	// write's line removed, and that version's value. A write computed from
	// goneVer was computed from a record a Success has since deleted.
	goneVer driver.Version
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
//     merged, with the later expiry and longer TTL: older plus what newer
//     changed in its base (adapter.MergeRecordsFrom) when the store knows the
//     base's value, which counts two failures at one millisecond twice;
//     else the union of the two (adapter.MergeRecords).
//
// The result carries the latest delete's goneVer/goneVal on.
func combine(older, newer write, now time.Time) write {
	if !newer.del && older.goneVer != driver.NoVersion && newer.base == older.goneVer {
		v, ok := adapter.RebaseOnDelete(newer.value, older.goneVal)
		if !ok {
			return older
		}
		// What is left is what newer added to an absent record.
		newer.value, newer.baseVal, newer.baseKnown, newer.baseLocal = v, nil, true, true
	}
	var merged write
	switch {
	case newer.del:
		return newer
	case older.del, newer.base == older.ver, !now.Before(older.exp):
		merged = newer
	default:
		merged = newer
		if newer.baseKnown {
			merged.value = adapter.MergeRecordsFrom(newer.baseVal, older.value, newer.value, newer.baseLocal)
		} else {
			merged.value = adapter.MergeRecords(older.value, newer.value)
		}
		merged.ttl = max(older.ttl, newer.ttl)
		if older.exp.After(newer.exp) {
			merged.exp = older.exp
		}
		merged.base, merged.baseVal, merged.baseKnown, merged.baseLocal = older.base, older.baseVal, older.baseKnown, older.baseLocal
	}
	merged.goneVer, merged.goneVal = older.goneVer, older.goneVal
	return merged
}
