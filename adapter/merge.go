package adapter

import "github.com/kvbreaker/kvbreaker/internal/record"

// MergeRecords merges two breaker records that a store without
// compare-and-swap received concurrently (older first) into one that loses
// neither's failures nor restraint: the union of their failure instants, the
// later restraint, and the probe flag if either was probing. Values that are
// not records: the newer wins. For last-writer-wins adapters that can see
// both writes (backends/cloudflarekv); values stay opaque to every other
// adapter.
func MergeRecords(older, newer []byte) []byte { return record.Merge(older, newer) }

// MergeRecordsFrom merges newer, a record computed from base, into older, a
// record written meanwhile: older plus what newer changed in base, counting
// failure instants as a multiset, so two failures in one millisecond count
// twice (MergeRecords counts them once). built says older is known to be
// built on base; otherwise, when older lacks some of base's failures, it may
// never have seen base and MergeRecords' union is used. For the same
// adapters as MergeRecords, when they know the record a write was computed
// from.
func MergeRecordsFrom(base, older, newer []byte, built bool) []byte {
	return record.MergeFrom(base, older, newer, built)
}

// RebaseOnDelete turns value, a record computed from gone before gone was
// deleted, into what it adds to an absent record: its failure instants less
// gone's (as a multiset), without gone's restraint. ok is false when nothing is left. For
// the same adapters as MergeRecords.
func RebaseOnDelete(value, gone []byte) (_ []byte, ok bool) {
	return record.RebaseOnDelete(value, gone)
}
